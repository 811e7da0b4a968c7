/**
 * What one VM may hold at its gateway (decisions.md section 8): connections open at once and new ones
 * a second, counted per VM; past either a connection is refused, saying which.
 */

export interface GatewayLimits {
  /** Connections open at once. */
  maxOpen: number;
  /** New connections in one second. */
  newPerSecond: number;
  /** A connection that moves no byte either way this long is closed. */
  idleMs: number;
}
export const GATEWAY_LIMITS: GatewayLimits = { maxOpen: 256, newPerSecond: 50, idleMs: 10 * 60_000 };

/** A VM's connections: how many are open, and how many began in the current second. */
interface VmConnections {
  open: number;
  second: number;
  began: number;
}

export class ConnectionLimits {
  private readonly perVm = new Map<string, VmConnections>();

  constructor(
    readonly limits: GatewayLimits,
    /** Milliseconds since the epoch, for the per-second count. */
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one more connection of the VM, answering how to count it closed; or why it may not open now. */
  admit(vmId: string): { release: () => void } | { refusal: string } {
    const second = Math.floor(this.now() / 1000);
    let c = this.perVm.get(vmId);
    if (!c) this.perVm.set(vmId, (c = { open: 0, second, began: 0 }));
    if (c.second !== second) [c.second, c.began] = [second, 0];
    if (c.open >= this.limits.maxOpen) return { refusal: `this VM has ${c.open} connections open, the most it may (${this.limits.maxOpen})` };
    if (c.began >= this.limits.newPerSecond) return { refusal: `this VM opened ${c.began} connections this second, the most it may (${this.limits.newPerSecond} a second)` };
    c.began++;
    c.open++;
    const counted = c;
    return { release: () => void counted.open-- };
  }

  /** The VM is gone: its counts go with it. */
  forget(vmId: string): void {
    this.perVm.delete(vmId);
  }
}
