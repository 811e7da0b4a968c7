/**
 * A VM host's side of secrets: a harness's provider key (brokered) is sealed into the database for
 * this host's gateway and removed from the guest; every other secret goes into the guest as before.
 */
import type { Db } from '../../store/db.ts';
import * as egressStore from '../../store/egress.ts';
import * as vmStore from '../../store/vms.ts';
import { brokeredNames } from '../../harness/providers.ts';
import type { SecretBox } from './secretBox.ts';
import type { SecretsOutcome } from '../../domain/runs.ts';


/** What a sealed secret is bound to: a row copied to another VM or name does not open. */
export const sealContext = (vmId: string, name: string) => `${vmId}/${name}`;

export class HostCredentials {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  /**
   * Applies a secrets change: the guest first (it may refuse, and then nothing is kept), then the
   * sealed keys. A brokered name is always removed from the guest, so no earlier value stays there.
   */
  async apply(vmId: string, set: Record<string, string | null>, guest: (set: Record<string, string | null>) => Promise<string[]>): Promise<SecretsOutcome> {
    const brokerable = new Set(brokeredNames((await vmStore.harnessOf(this.db, vmId)) ?? ''));
    const toGuest: Record<string, string | null> = {};
    const toBroker: Record<string, string | null> = {};
    for (const [name, value] of Object.entries(set)) {
      if (brokerable.has(name)) {
        toBroker[name] = value === null ? null : this.box.seal(value, sealContext(vmId, name));
        toGuest[name] = null;
      } else {
        toGuest[name] = value;
      }
    }
    const names = await guest(toGuest);
    const brokered = await this.db.transaction((tx) => egressStore.putBrokered(tx, vmId, toBroker));
    return { names, brokered };
  }

  /** A VM's brokered secrets sealed again for each of `toVmIds` (VMs branched from it): by VM, by name. */
  async sealedFor(fromVmId: string, toVmIds: string[]): Promise<Record<string, Record<string, string>>> {
    const out: Record<string, Record<string, string>> = {};
    const rows = await egressStore.listBrokered(this.db, fromVmId);
    for (const vmId of toVmIds) {
      out[vmId] = Object.fromEntries(rows.map((r) => [r.name, this.box.seal(this.box.open(r.sealed, sealContext(fromVmId, r.name)), sealContext(vmId, r.name))]));
    }
    return out;
  }

  /** The real key of a brokered secret, for the gateway; null when the VM has none. */
  async key(vmId: string, name: string): Promise<string | null> {
    const sealed = await egressStore.brokeredSecret(this.db, vmId, name);
    return sealed === null ? null : this.box.open(sealed, sealContext(vmId, name));
  }
}
