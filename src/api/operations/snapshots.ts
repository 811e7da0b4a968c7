/**
 * Branching a running VM, and snapshots (decisions section 18): branchVM, createSnapshot,
 * listSnapshots, getSnapshot, deleteSnapshot, createVMFromSnapshot.
 */
import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { CreateVmRequest, IdParam, idParam } from '../schemas.ts';
import { idempotencyKey, replayable } from '../idempotency.ts';

const text = () => z.string().regex(/^[^\u0000]*$/, 'must not contain NUL bytes');

export const Snapshot = z
  .object({
    snapshot_id: z.string().meta({ description: 'A `snap_` id' }),
    vm_id: z.string().meta({ description: 'The VM it was taken of (it may since have been destroyed)' }),
    name: z.string(),
    size_bytes: z.int().meta({ description: 'What it takes on its host: saved memory (the pages that differ from the shared base) and the disks\' frozen layers' }),
    created_at: z.iso.datetime().meta({ description: 'RFC 3339 UTC timestamp: the instant it holds' }),
  })
  .meta({ id: 'Snapshot' });

const SnapshotList = z
  .object({ data: z.array(Snapshot), has_more: z.boolean().meta({ description: 'More, older snapshots follow: ask again with `after` the last id' }) })
  .meta({ id: 'SnapshotList' });

const StartFromFields = CreateVmRequest.pick({ plan: true, cycle: true, tier: true, count: true, egress: true, auto_stop_after_s: true, expires_at: true });

export const BranchRequest = StartFromFields.meta({
  id: 'BranchRequest',
  description:
    "New VMs resumed from this instant of the VM. `count` 1–20 (default 1); more than one needs tier `spot`, as a swarm. Default plan or tier: the VM's own. " +
    "A plan or tier must have the VM's size (its memory is the VMs'). Harness, image, secrets and egress are the VM's unless set here.",
});

const BranchResponse = z
  .object({
    vm_ids: z.array(z.string()).meta({ description: 'The new VMs, `provisioning` until each has resumed with its own identity' }),
    parent_vm_id: z.string(),
    paused_ms: z.int().meta({ description: 'How long the VM was paused while its memory and devices were saved and its disks frozen' }),
  })
  .meta({ id: 'BranchResponse' });

const CreateSnapshotRequest = z
  .strictObject({ name: text().min(1).max(100).optional().meta({ description: 'A name of yours; default: the VM id and the time' }) })
  .meta({ id: 'CreateSnapshotRequest' });

const StartSnapshotRequest = StartFromFields.meta({
  id: 'StartSnapshotRequest',
  description: "As a branch: `count` 1–20, more than one needs tier `spot`; default plan or tier: the VM's it was taken of, while that VM exists, else its size's plan.",
});

const StartSnapshotResponse = z.object({ vm_ids: z.array(z.string()) }).meta({ id: 'StartSnapshotResponse' });

const SnapshotParam = z.strictObject({ id: idParam('A snapshot id (`snap_…`)') });
const SnapshotListQuery = z.strictObject({
  after: z.string().max(100).optional().meta({ description: 'A snapshot id: the page after it (newest first)' }),
  limit: z.coerce.number().int().min(1).max(100).default(50).meta({ description: 'Page size, 1–100' }),
  vm_id: z.string().max(100).optional().meta({ description: 'Only the snapshots taken of this VM (it may since have been destroyed)' }),
});

export const branchVM = defineOperation({
  operationId: 'branchVM',
  method: 'post',
  path: '/v1/api/vms/{id}/branch',
  summary: 'Branch a running VM into new VMs that go on from this instant (charges money)',
  description:
    'The VM is paused while its memory and devices are saved and its disks frozen copy-on-write, then runs on (`paused_ms`). ' +
    'Each new VM resumes from that instant with its processes, memory and files as they were, and its own id, hostname, ' +
    'machine id, address, a reseeded RNG and the right clock. Runs in flight stay with the VM branched; their processes are ended ' +
    "in the new VMs. Charged like a create (a plan's price per VM on the card, or an hour of credits per VM up front), all or none. " +
    "New VMs start on the VM's host. A VM that is not running: 409 `vm_not_running`.",
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'vm_branch' },
  cli: { command: 'vms branch', examples: ['agentvm vms branch vm_… --count 3 --tier spot'] },
  money: true,
  extension: true,
  params: IdParam,
  body: { schema: BranchRequest, required: false },
  success: { status: 201, schema: BranchResponse, description: 'The new VMs, provisioning' },
  errors: ['not_found', 'vm_not_running', 'card_required', 'card_declined', 'insufficient_credits', 'quota_exceeded', 'idempotency_conflict', 'unavailable'],
  handler: async ({ c, services, principal, params, body }) => {
    const key = idempotencyKey(c.req.header('idempotency-key'));
    return replayable(await services.snapshots.branch(principal.tenantId, params.id, body ?? {}, key));
  },
});

export const createSnapshot = defineOperation({
  operationId: 'createSnapshot',
  method: 'post',
  path: '/v1/api/vms/{id}/snapshots',
  summary: 'Snapshot a running VM: memory, devices and disks; the VM runs on',
  description:
    'The VM is paused for the saving only. The snapshot outlives the VM (destroy it and start the snapshot later), is checked ' +
    '(size and hash of every file) before each start, and stays on the host that took it. It counts in the `snapshots` limit and, by ' +
    'its size, in `disk_gib`. A VM that is not running: 409 `vm_not_running`.',
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'snapshot_create' },
  cli: { command: 'snapshots create', examples: ['agentvm snapshots create vm_… --name "tests green"'] },
  extension: true,
  params: IdParam,
  body: { schema: CreateSnapshotRequest, required: false },
  success: { status: 201, schema: Snapshot, description: 'The snapshot, whole and checked' },
  errors: ['not_found', 'vm_not_running', 'quota_exceeded', 'unavailable'],
  handler: async ({ services, principal, params, body }) => ({ body: await services.snapshots.create(principal.tenantId, params.id, body ?? {}) }),
});

export const listSnapshots = defineOperation({
  operationId: 'listSnapshots',
  method: 'get',
  path: '/v1/api/snapshots',
  summary: 'Your snapshots, newest first',
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'snapshots_list' },
  cli: { command: 'snapshots list', columns: ['snapshot_id', 'name', 'vm_id', 'size_bytes', 'created_at'] },
  extension: true,
  query: SnapshotListQuery,
  success: { status: 200, schema: SnapshotList, description: 'A page of snapshots' },
  errors: [],
  handler: async ({ services, principal, query }) => ({ body: await services.snapshots.list(principal.tenantId, query.limit, query.after, query.vm_id) }),
});

export const getSnapshot = defineOperation({
  operationId: 'getSnapshot',
  method: 'get',
  path: '/v1/api/snapshots/{id}',
  summary: 'Get a snapshot',
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'snapshot_get' },
  cli: { command: 'snapshots get' },
  extension: true,
  params: SnapshotParam,
  success: { status: 200, schema: Snapshot, description: 'The snapshot' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({ body: await services.snapshots.get(principal.tenantId, params.id) }),
});

export const deleteSnapshot = defineOperation({
  operationId: 'deleteSnapshot',
  method: 'delete',
  path: '/v1/api/snapshots/{id}',
  summary: 'Delete a snapshot; VMs started from it keep running',
  description: 'While a VM started from it is starting and has never run (its first start reads the snapshot\'s files): 409 `conflict`; a VM of it that ran, stopped or suspended since, does not hold it.',
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'snapshot_delete', destructive: true },
  cli: { command: 'snapshots delete' },
  extension: true,
  params: SnapshotParam,
  success: { status: 200, schema: Snapshot, description: 'The snapshot deleted' },
  errors: ['not_found', 'conflict'],
  handler: async ({ services, principal, params }) => ({ body: await services.snapshots.delete(principal.tenantId, params.id) }),
});

export const createVMFromSnapshot = defineOperation({
  operationId: 'createVMFromSnapshot',
  method: 'post',
  path: '/v1/api/snapshots/{id}/vms',
  summary: 'Start new VMs from a snapshot (charges money)',
  description:
    "Each VM resumes the snapshot's instant with an identity of its own, as a branch's do; charged like a create, all or none. " +
    'The snapshot is checked first: one whose files are damaged or missing is refused with 409 `conflict` naming what is wrong, and nothing is charged.',
  tag: 'Snapshots',
  audience: 'customer',
  mcp: { tool: 'snapshot_start' },
  cli: { command: 'snapshots start', examples: ['agentvm snapshots start snap_… --count 2 --tier spot'] },
  money: true,
  extension: true,
  params: SnapshotParam,
  body: { schema: StartSnapshotRequest, required: false },
  success: { status: 201, schema: StartSnapshotResponse, description: 'The new VMs, provisioning' },
  errors: ['not_found', 'conflict', 'card_required', 'card_declined', 'insufficient_credits', 'quota_exceeded', 'idempotency_conflict', 'unavailable'],
  handler: async ({ c, services, principal, params, body }) => {
    const key = idempotencyKey(c.req.header('idempotency-key'));
    return replayable(await services.snapshots.startVms(principal.tenantId, params.id, body ?? {}, key));
  },
});

export const SNAPSHOT_OPERATIONS = [branchVM, createSnapshot, listSnapshots, getSnapshot, deleteSnapshot, createVMFromSnapshot];
