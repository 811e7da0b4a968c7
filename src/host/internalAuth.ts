/**
 * Who may call a VM host's internal endpoint, and about what: a live API replica credential (never a
 * host's), and only about VMs (and captures of templates whose source VM, and snapshots) the database
 * places on this host. The host's own credential goes back with every answer to an authenticated replica, so that the
 * replica knows it reached the host the VM's row names.
 */
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { CredentialHolder, InternalCredentials } from '../domain/internalCredentials.ts';
import * as store from '../store/internalCredentials.ts';

export interface InternalAuthority {
  readonly hostId: string;
  /** This host's credential, sent back to replicas in HOST_CREDENTIAL_HEADER. */
  readonly credential: string;
  /** The replica a bearer token is the live credential of, or null. */
  replica(token: string | undefined): Promise<CredentialHolder | null>;
  /** Whether the VM's row places it on this host. */
  holdsVm(vmId: string): Promise<boolean>;
  /** Whether the template's source VM is on this host. */
  holdsTemplate(templateId: string): Promise<boolean>;
  /** Whether the snapshot's row places its files on this host. */
  holdsSnapshot(snapshotId: string): Promise<boolean>;
}

export function hostAuthority(o: { db: Db; clock: Clock; hostId: string; credential: string; credentials: InternalCredentials }): InternalAuthority {
  return {
    hostId: o.hostId,
    credential: o.credential,
    async replica(token) {
      if (!token) return null;
      const holder = await o.credentials.verify(token);
      return holder?.kind === 'replica' ? holder : null;
    },
    async holdsVm(vmId) {
      return (await store.hostOfVm(o.db, vmId)) === o.hostId;
    },
    async holdsTemplate(templateId) {
      return (await store.hostOfTemplate(o.db, templateId)) === o.hostId;
    },
    async holdsSnapshot(snapshotId) {
      return (await store.hostOfSnapshot(o.db, snapshotId)) === o.hostId;
    },
  };
}
