/**
 * What a request of the sandbox plane resolved to (sandboxPlane.ts), as the Connect handlers see it.
 */
import { Code, ConnectError, createContextKey, type HandlerContext } from '@connectrpc/connect';
import type { GuestShell } from '../domain/guestAccess.ts';
import type { ProcessOpen } from '../wire/protocol.ts';

export interface SandboxContext {
  vmId: string;
  tenantId: string;
  /** E2B's user of the request (`user` or `root`), from its Basic authorization. */
  user: string;
  /** The sandbox's envs (E2B's `envVars` at create), under each process's own. */
  envVars: Record<string, string>;
  /** A terminal in the guest, with the run environment of the VM's harness; or `process` in its place, where the guest can. */
  openShell(size: { cols: number; rows: number }, process?: ProcessOpen): Promise<GuestShell>;
  /** The programs the guest started that still run (each with its ProcessOpen.meta), or null where it cannot tell. */
  listProcesses(): Promise<{ pid: number; meta: string }[] | null>;
  /** One of them followed again from now on, or null. */
  attachProcess(pid: number): Promise<GuestShell | null>;
  /**
   * A place in the tenant's `run_streams` (section 14) for a process followed here, held until `end`;
   * refused with Connect's resource_exhausted when the tenant has every place taken.
   */
  holdStream(): Promise<{ end(): Promise<void>; lapsed?: Promise<void> }>;
  /** Ends this request's connection mid-answer (its sandbox went: killed, paused, stopped). */
  drop?(): void;
}

export const SANDBOX = createContextKey<SandboxContext | null>(null, { description: 'the E2B sandbox of the request' });

export function sandboxOf(ctx: HandlerContext): SandboxContext {
  const sb = ctx.values.get(SANDBOX);
  if (!sb) throw new ConnectError('no sandbox', Code.NotFound);
  return sb;
}
