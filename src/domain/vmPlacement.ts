/**
 * Where new VMs go, and their rows: a host with room (spot VMs preempted for a non-spot order when
 * that makes room; VMs of an image on the host that holds its layers), a free network slot each, and
 * the rows in status provisioning. A create, a fork and a branch all place their VMs here.
 */
import type { Queryable } from '../store/db.ts';
import * as previewStore from '../store/previews.ts';
import * as vmStore from '../store/vms.ts';
import { providerHosts } from '../harness/providers.ts';
import type { Clock } from './clock.ts';
import type { EgressPolicy } from './egress.ts';
import { DomainError } from './errors.ts';
import type { HostService } from './hosts.ts';
import { newId } from './ids.ts';
import type { VmOrder } from './vmOrder.ts';

const RETRY_AFTER_SECONDS = '30';

/** A new VM's policy when its request gives none: its harness's providers' public API hosts. */
export function defaultEgress(harness: string): EgressPolicy {
  return { mode: 'allowlist', allow: providerHosts(harness) };
}

/** The image a new VM's root starts from, and the host that holds its layers. */
export interface PlacedImage {
  image_id: string | null;
  host_id: string | null;
}

/** VMs started from a snapshot: their ids (made ahead), the snapshot, and the guest image its memory ran on. */
export interface SnapshotStart {
  ids: string[];
  snapshotId: string;
  imageId: string | null;
}

/** Places and inserts `order.count` VMs (status provisioning); answers their ids. */
/** The refusal of VMs no host has room for (`where`: why only one host would do). */
export function noRoom(count: number, where = ''): DomainError {
  const what = count > 1 ? `these ${count} VMs` : 'this VM';
  return new DomainError('unavailable', `no VM host has room for ${what} right now${where}`, 'try again later, or with fewer VMs', { 'Retry-After': RETRY_AFTER_SECONDS });
}

/** VMs from a snapshot start on the host that took it. */
export const SNAPSHOT_HOST = ' (VMs from a snapshot start on the host that took it)';

/**
 * `count` new VM ids whose preview labels (section 16: the id lowercased) no live VM has and no two of
 * them share: an id whose label is taken is drawn again.
 */
export async function freshVmIds(q: Queryable, count: number, draw: () => string = () => newId('vm')): Promise<string[]> {
  const ids: string[] = [];
  const label = (id: string) => id.toLowerCase().replace(/_/g, '-');
  while (ids.length < count) {
    const id = draw();
    if (ids.some((x) => label(x) === label(id)) || (await vmStore.labelTaken(q, id))) continue;
    ids.push(id);
  }
  return ids;
}

export async function placeVms(
  tx: Queryable,
  hosts: HostService,
  clock: Clock,
  tenantId: string,
  order: VmOrder,
  templateId: string | null,
  image: PlacedImage | null,
  from: SnapshotStart | null,
): Promise<string[]> {
  const need = { vcpus: order.vcpus, memory_mib: order.memory_mib, disk_gib: order.disk_gib };
  const placed = await hosts.place(tx, need, order.count, order.tier !== 'spot', image?.host_id ?? undefined);
  if (!placed) throw noRoom(order.count, from ? SNAPSHOT_HOST : image?.host_id ? ` (VMs of image ${image.image_id} run on the host that built it)` : '');
  const now = clock.now();
  if (placed.preempt.length) await vmStore.preempt(tx, placed.preempt, now);
  const slots = await vmStore.freeNetSlots(tx, placed.host.host_id, order.count);
  if (slots.length < order.count) {
    throw new DomainError('unavailable', 'the VM host has no free network for this VM', 'try again later', { 'Retry-After': RETRY_AFTER_SECONDS });
  }
  const ids: string[] = [];
  const drawn = from ? from.ids : await freshVmIds(tx, order.count);
  for (let i = 0; i < order.count; i++) {
    const vmId = drawn[i];
    await vmStore.insert(tx, {
      vm_id: vmId,
      tenant_id: tenantId,
      host_id: placed.host.host_id,
      plan: order.plan,
      cycle: order.cycle,
      tier: order.tier,
      harness: order.harness,
      template_id: templateId,
      vcpus: order.vcpus,
      memory_mib: order.memory_mib,
      disk_gib: order.disk_gib,
      image_id: from ? from.imageId : placed.host.image_id,
      root_image_id: image?.image_id ?? null,
      snapshot_id: from?.snapshotId ?? null,
      net_slot: slots[i],
      egress: order.egress ?? defaultEgress(order.harness),
      auto_stop_after_s: order.auto_stop_after_s,
      expires_at: order.expires_at,
      // Rows of one request get distinct, ordered timestamps so "newest first" is stable.
      created_at: new Date(now.getTime() + i),
    });
    ids.push(vmId);
    if (order.auto_resume) await previewStore.setAutoResume(tx, tenantId, vmId, true);
  }
  return ids;
}
