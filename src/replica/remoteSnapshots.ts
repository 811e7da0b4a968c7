/**
 * The API replica's side of snapshots and branches (decisions section 18): each step goes to the host
 * that runs the VM or holds the snapshot, through the internal endpoint (host/internalContract.ts),
 * where the host's own LocalSnapshots (host/branching.ts) does it. The domain's rules, money and rows
 * stay here, in the same SnapshotService a single server runs.
 */
import type { Db } from '../store/db.ts';
import { DomainError } from '../domain/errors.ts';
import type { SnapshotHost } from '../domain/snapshots.ts';
import * as endpoints from '../store/internalCredentials.ts';
import { HostUnreachable, type HostTarget } from './internalClient.ts';
import { target, type RemoteHosts } from './remoteHosts.ts';

export class RemoteSnapshots implements SnapshotHost {
  constructor(
    private readonly db: Db,
    private readonly hosts: RemoteHosts,
  ) {}

  private async host(hostId: string): Promise<HostTarget | null> {
    return target(await endpoints.endpointOfHost(this.db, hostId));
  }

  /** One step on the host: a host down, gone or cut off mid-answer is a 503 to try again (nothing was made). */
  private async step<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof DomainError) throw err;
      // The host's own words (paths, QEMU's) stay in its log: the Error shape says what happened.
      const what = err instanceof HostUnreachable ? 'could not be reached' : 'failed at it (its log says why)';
      throw new DomainError('unavailable', `the snapshot's host ${what}`, 'try again shortly', { 'Retry-After': '10' });
    }
  }

  take(hostId: string, req: Parameters<SnapshotHost['take']>[1]): Promise<{ size_bytes: number; paused_ms: number }> {
    const { vm_id, ...body } = req;
    // Saving a VM's memory takes its host up to two minutes (suspend.ts).
    return this.step(async () => this.hosts.call(await this.host(hostId), 'snapshotTake', vm_id, body, { ms: 150_000 }));
  }

  check(hostId: string, snapshotId: string): Promise<string | null> {
    // Every file is read and hashed: a snapshot of large disks takes a while.
    return this.step(async () => (await this.hosts.call(await this.host(hostId), 'snapshotCheck', snapshotId, undefined, { ms: 600_000 })).damaged);
  }

  async prepare(hostId: string, snapshotId: string, vmIds: string[]): Promise<void> {
    await this.step(async () => this.hosts.call(await this.host(hostId), 'snapshotPrepare', snapshotId, { vm_ids: vmIds }, { ms: 60_000 }));
  }

  sealedSecrets(hostId: string, fromVmId: string, vmIds: string[]): Promise<Record<string, Record<string, string>>> {
    return this.step(async () => (await this.hosts.call(await this.host(hostId), 'sealedSecrets', fromVmId, { vm_ids: vmIds }, { ms: 30_000 })).sealed);
  }

  async discard(hostId: string, snapshotId: string): Promise<void> {
    await this.step(async () => this.hosts.call(await this.host(hostId), 'snapshotDiscard', snapshotId, { snapshot: true, vm_ids: [] }, { ms: 60_000 }));
  }

  async discardVms(hostId: string, snapshotId: string, vmIds: string[]): Promise<void> {
    await this.step(async () => this.hosts.call(await this.host(hostId), 'snapshotDiscard', snapshotId, { snapshot: false, vm_ids: vmIds }, { ms: 60_000 }));
  }
}
