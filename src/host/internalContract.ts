/**
 * The internal endpoint a VM host serves to the API replicas (runs, secrets and captures of its own
 * VMs), declared once like the public operations: each route's parameters, body and answer as zod
 * schemas. The host validates what comes in with them, the replica what comes back; errors have the
 * public Error shape (`{error, message}`) with the public codes and statuses.
 */
import { z } from 'zod';

export const VmIdParam = z.string().regex(/^vm_[A-Za-z0-9]+$/, 'a VM id');
export const TemplateIdParam = z.string().regex(/^tpl_[A-Za-z0-9]+$/, 'a template id');

export const RunIdParam = z.string().regex(/^run_[A-Za-z0-9]+$/, 'a run id');
export const SnapshotIdParam = z.string().regex(/^snap_[A-Za-z0-9]+$/, 'a snapshot id');
const VmIds = z.array(VmIdParam).min(1).max(20);

export const INTERNAL_ROUTES = {
  harnesses: {
    method: 'get',
    path: '/internal/vms/:id/harnesses',
    params: VmIdParam,
    body: null,
    response: z.object({ harnesses: z.array(z.string()).nullable() }),
  },
  /** Runs of the VM were queued: the host looks at them now (it also looks every second). */
  runs: {
    method: 'post',
    path: '/internal/vms/:id/runs',
    params: VmIdParam,
    body: null,
    response: z.object({ kicked: z.literal(true) }),
  },
  /** Kills a running run's process group in its guest; its end is recorded as `cancelled`. */
  cancelRun: {
    method: 'post',
    path: '/internal/vms/:id/runs/cancel',
    params: VmIdParam,
    body: z.strictObject({ run_id: RunIdParam }),
    response: z.object({ cancelled: z.literal(true) }),
  },
  secrets: {
    method: 'post',
    path: '/internal/vms/:id/secrets',
    params: VmIdParam,
    body: z.strictObject({ set: z.record(z.string(), z.string().nullable()) }),
    response: z.object({ names: z.array(z.string()), brokered: z.array(z.string()) }),
  },
  /** The TCP ports listening in the guest now (a replica's `listVMPorts`). */
  ports: {
    method: 'get',
    path: '/internal/vms/:id/ports',
    params: VmIdParam,
    body: null,
    response: z.object({ ports: z.array(z.object({ port: z.number().int(), process: z.string().nullable() })) }),
  },
  capture: {
    method: 'post',
    path: '/internal/templates/:id/capture',
    params: TemplateIdParam,
    body: null,
    response: z.object({ started: z.literal(true) }),
  },
  // Snapshots and branches (domain/snapshots.ts SnapshotHost): on the host that runs the VM, or holds the snapshot.
  /** Saves the running VM as the snapshot whose row is `creating` (the VM runs on). */
  snapshotTake: {
    method: 'post',
    path: '/internal/vms/:id/snapshot',
    params: VmIdParam,
    body: z.strictObject({
      snapshot_id: SnapshotIdParam,
      image_id: z.string().max(200),
      vcpus: z.number().int().min(1),
      memory_mib: z.number().int().min(1),
      runs: z.array(RunIdParam),
      kind: z.enum(['snapshot', 'branch']),
    }),
    response: z.object({ size_bytes: z.number().int(), paused_ms: z.number().int() }),
  },
  /** Why the snapshot's files cannot be used (null: whole). */
  snapshotCheck: {
    method: 'post',
    path: '/internal/snapshots/:id/check',
    params: SnapshotIdParam,
    body: null,
    response: z.object({ damaged: z.string().nullable() }),
  },
  /** Makes the directories of new VMs (not rows yet) from the snapshot. */
  snapshotPrepare: {
    method: 'post',
    path: '/internal/snapshots/:id/prepare',
    params: SnapshotIdParam,
    body: z.strictObject({ vm_ids: VmIds }),
    response: z.object({ prepared: z.literal(true) }),
  },
  /** Removes the snapshot's files (`snapshot`), and the directories of VMs made from it that will never run. */
  snapshotDiscard: {
    method: 'post',
    path: '/internal/snapshots/:id/discard',
    params: SnapshotIdParam,
    body: z.strictObject({ snapshot: z.boolean(), vm_ids: z.array(VmIdParam).max(20) }),
    response: z.object({ discarded: z.literal(true) }),
  },
  /** The VM's brokered secrets sealed again for each new VM (by VM, by name). */
  sealedSecrets: {
    method: 'post',
    path: '/internal/vms/:id/sealed-secrets',
    params: VmIdParam,
    body: z.strictObject({ vm_ids: VmIds }),
    response: z.object({ sealed: z.record(z.string(), z.record(z.string(), z.string())) }),
  },
} as const;

export type InternalRoute = keyof typeof INTERNAL_ROUTES;

/** Where a route is for one id. */
export function internalPath(route: InternalRoute, id: string): string {
  return INTERNAL_ROUTES[route].path.replace(':id', encodeURIComponent(id));
}

/** The error body of every non-2xx internal answer: the public Error shape. */
export const InternalErrorSchema = z.object({ error: z.string(), message: z.string(), hint: z.string().optional() });

/**
 * The routes whose bodies are bytes, not JSON: a VM's files (GET answers bytes, or `{kind: "dir", path,
 * entries}`; PUT takes bytes and answers `{path, size}`; `path` in the query, checked again here), and
 * its shell, a WebSocket: the terminal's size and environment in the SHELL_SPEC_HEADER (base64url JSON
 * `{cols, rows, env}`), its end in the close (SHELL_INTERNAL_CLOSE, the reason as JSON).
 */
export const INTERNAL_FILES_PATH = '/internal/vms/:id/files';
export const INTERNAL_SHELL_PATH = '/internal/vms/:id/shell';
export const SHELL_SPEC_HEADER = 'x-agentvm-shell';
export const SHELL_INTERNAL_CLOSE = { exited: 1000, cut: 4000 } as const;

export const ShellSpecSchema = z.strictObject({
  cols: z.number().int().min(1).max(1000),
  rows: z.number().int().min(1).max(1000),
  env: z.record(z.string(), z.string()),
});

export const DirAnswerSchema = z.object({
  kind: z.literal('dir'),
  path: z.string(),
  entries: z.array(z.object({ name: z.string(), type: z.enum(['file', 'dir', 'link']), size: z.number().int(), mtime: z.string() })),
});

export const WrittenSchema = z.object({ path: z.string(), size: z.number().int() });

/**
 * The answering host's own credential, on every answer to an authenticated replica (and on a shell's
 * WebSocket handshake): the replica checks it against the live credential of the host the VM's row names.
 */
export const HOST_CREDENTIAL_HEADER = 'x-agentvm-host-credential';

/**
 * A connection to a TCP port in a guest, for a replica's preview or port forward: an HTTP upgrade
 * (`Upgrade: PORT_UPGRADE`) answered `101` once the guest has connected to the port on its loopback,
 * then the connection's bytes both ways; nothing listening is `502 port_closed`, other refusals the
 * public Error shape. Both answers carry the host's credential.
 */
export const INTERNAL_PORT_PATH = '/internal/vms/:id/ports/:port/connect';
export const PORT_UPGRADE = 'agentvm-port';
