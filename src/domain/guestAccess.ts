/**
 * A person's way into a VM: a terminal, and files on its persist disk. What reaches the guests (the
 * VM's host in this process, or the VM's host through an API replica) implements GuestAccess; the
 * services below hold the rules: tenancy, the VM running, one-use tickets, the size limit.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from './clock.ts';
import type { Db } from '../store/db.ts';
import { DomainError, invalid } from './errors.ts';
import type { VmService, VmRow } from './vms.ts';
import { filesPath, type DirEntry, type ProcessOpen } from '../wire/protocol.ts';
import { shellEnvironment } from '../harness/invoke.ts';
import * as ticketStore from '../store/shellTickets.ts';
import { shellLeaseId, StreamLease, takeStreamLease } from './limits.ts';

/** The largest file a write takes. */
export const MAX_FILE_BYTES = 100 * 1024 * 1024;
/** How long a shell ticket is good for (it is good once). */
export const SHELL_TICKET_TTL_MS = 60_000;

/** How a shell ended: its exit, or cut (the VM stopped, the host went away). */
export type ShellEnd =
  | { kind: 'exit'; exit_code: number | null; signal: string | null }
  | { kind: 'cut'; error: string; message: string };

/** A terminal in a guest: bytes in and out, a size, and an end. */
export interface GuestShell {
  /** Sends keystrokes; resolves once the guest has room for more. */
  write(bytes: Buffer): Promise<void>;
  resize(cols: number, rows: number): void;
  /** Output as it comes; call `done` when the chunk is passed on (the guest sends more meanwhile, up to a window). */
  output(fn: (chunk: Buffer, done: () => void) => void): void;
  /** Hangs up: every process of the shell's session ends. */
  close(): void;
  readonly ended: Promise<ShellEnd>;
  /** The guest started ShellOptions.process itself: the stream carries its frames, not a terminal. */
  readonly framed?: boolean;
}

export interface ShellOptions {
  cols: number;
  rows: number;
  env: Record<string, string>;
  /** A program in place of the login shell, where the guest can (protocol.ts ProcessOpen). */
  process?: ProcessOpen;
}

export type GuestRead =
  | { kind: 'dir'; path: string; entries: DirEntry[] }
  | { kind: 'file'; path: string; size: number; body: ReadableStream<Uint8Array> };

export interface WriteOptions {
  maxBytes: number;
  /** The Content-Length the client declared: fewer bytes than this is a cut upload. */
  expectedBytes?: number;
}

/** What reaches a VM's guest for shells and files (this process's host, or the VM's host from a replica). */
export interface GuestAccess {
  openShell(vmId: string, opts: ShellOptions): Promise<GuestShell>;
  readFile(vmId: string, path: string): Promise<GuestRead>;
  writeFile(vmId: string, path: string, body: AsyncIterable<Uint8Array>, opts: WriteOptions): Promise<{ path: string; size: number }>;
  /** The programs the guest started (ShellOptions.process) that still run, or null where its agent cannot tell (protocol < 8). */
  listProcesses?(vmId: string): Promise<{ pid: number; meta: string }[] | null>;
  /** One of them followed again on a new stream (its frames from now on), or null when it no longer runs. */
  attachProcess?(vmId: string, pid: number): Promise<GuestShell | null>;
}

const notRunning = (vm: { status: string }) =>
  new DomainError('vm_not_running', `the VM is ${vm.status}`, 'start the VM and wait until it is running');

const noHost = () => new DomainError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });

/** The customer's path, checked by its letters: 400 naming `path`. */
export function checkedPath(p: string | undefined): string {
  const r = filesPath(p ?? '');
  if ('problem' in r) throw invalid('path', r.problem);
  return r.path;
}

const hashTicket = (t: string) => createHash('sha256').update(t).digest('hex');

/** Files on a VM's persist disk. */
export class FileService {
  constructor(
    private readonly vms: VmService,
    private readonly guest: GuestAccess | null,
  ) {}

  private async runningVm(tenantId: string, vmId: string): Promise<{ vm: VmRow; guest: GuestAccess }> {
    const vm = await this.vms.get(tenantId, vmId);
    if (vm.status !== 'running') throw notRunning(vm);
    if (!this.guest) throw noHost();
    return { vm, guest: this.guest };
  }

  async read(tenantId: string, vmId: string, rawPath: string | undefined): Promise<GuestRead> {
    const p = checkedPath(rawPath);
    const { guest } = await this.runningVm(tenantId, vmId);
    return guest.readFile(vmId, p);
  }

  async write(tenantId: string, vmId: string, rawPath: string | undefined, body: AsyncIterable<Uint8Array>, expectedBytes?: number): Promise<{ path: string; size: number }> {
    const p = checkedPath(rawPath);
    if (expectedBytes !== undefined && expectedBytes > MAX_FILE_BYTES) throw tooLarge();
    const { guest } = await this.runningVm(tenantId, vmId);
    return guest.writeFile(vmId, p, body, { maxBytes: MAX_FILE_BYTES, expectedBytes });
  }
}

export const tooLarge = () =>
  new DomainError('payload_too_large', `the file is larger than ${MAX_FILE_BYTES} bytes (100 MiB)`, 'split it, or fetch it from inside the VM');

/** Terminals in VMs, opened with a one-use ticket (a WebSocket cannot carry the key's header from a browser). */
export class ShellService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly vms: VmService,
    private readonly guest: GuestAccess | null,
  ) {}

  /** A ticket for the VM's shell socket: good once, for SHELL_TICKET_TTL_MS. */
  async issueTicket(tenantId: string, vmId: string): Promise<{ ticket: string; expiresAt: Date }> {
    const vm = await this.vms.get(tenantId, vmId);
    if (vm.status !== 'running') throw notRunning(vm);
    if (!this.guest) throw noHost();
    const ticket = `avm_shell_${randomBytes(24).toString('base64url')}`;
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + SHELL_TICKET_TTL_MS);
    const ticketHash = hashTicket(ticket);
    await this.db.transaction(async (tx) => {
      // The shell counts in run_streams from its ticket (which runs out, with its lease, if unused).
      await takeStreamLease(tx, { lease_id: shellLeaseId(ticketHash), tenant_id: tenantId, kind: 'shell', expires_at: expiresAt }, now);
      await ticketStore.insert(tx, { ticket_hash: ticketHash, tenant_id: tenantId, vm_id: vmId, expires_at: expiresAt }, now);
    });
    return { ticket, expiresAt };
  }

  /**
   * Uses a ticket up and opens the shell it was for; null for a ticket that is unknown, used, expired
   * or for another VM. The VM must still be running.
   */
  async connect(vmId: string, ticket: string, size: { cols: number; rows: number }): Promise<GuestShell | null> {
    if (!/^avm_shell_[A-Za-z0-9_-]{20,64}$/.test(ticket)) return null;
    const ticketHash = hashTicket(ticket);
    const used = await ticketStore.redeem(this.db, ticketHash, vmId, this.clock.now());
    if (!used) return null;
    // The ticket's lease is the open shell's from now on: renewed while it is open, ended with it.
    const lease = new StreamLease(this.db, this.clock, { lease_id: shellLeaseId(ticketHash), tenant_id: used.tenant_id, kind: 'shell' }, { renewNow: true });
    try {
      const vm = await this.vms.get(used.tenant_id, vmId);
      if (vm.status !== 'running') throw notRunning(vm);
      if (!this.guest) throw noHost();
      const shell = await this.guest.openShell(vmId, { ...size, env: shellEnvironment(vm.harness, vm.brokered_secret_names) });
      void shell.ended.finally(() => lease.end());
      void lease.lapsed.then(() => shell.close());
      return {
        write: (bytes) => shell.write(bytes),
        resize: (cols, rows) => shell.resize(cols, rows),
        output: (fn) => shell.output(fn),
        close: () => {
          void lease.end();
          shell.close();
        },
        ended: shell.ended,
      };
    } catch (err) {
      await lease.end();
      throw err;
    }
  }
}
