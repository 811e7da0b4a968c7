/**
 * The VMs a driver runs: one handle per QEMU (its channels, facts and end), kept from the moment a
 * start, resume, standby claim or adoption hands it over until its QEMU ends. Also the host's
 * business: starts under way, which standbys give way to.
 */
import type { EventEmitter } from 'node:events';
import path from 'node:path';
import { MAX_LINE, type JsonLineChannel, type LineOverflow } from './channel.ts';
import type { DataChannel } from './dataChannel.ts';
import { linkEgress } from './egress.ts';
import { machineEnded, machineFiles, type MachineFiles } from './machine.ts';
import { dataReady } from './guestChannels.ts';
import type { MachineOptions } from './machineStart.ts';
import type { ExitInfo, SnapshotSource, StartedFrom } from './driver.ts';
import type { HelloFacts } from '../wire/protocol.ts';

export interface DriverOptions extends MachineOptions {
  vmsDir: string;
  /** Empty ext4 filesystems, one per size, that new disks start as (copy-on-write). */
  blankDir: string;
  /** Where starts find snapshots of their shape (SnapshotStore); null: every start is a cold boot. */
  snapshots: SnapshotSource | null;
  log?: (msg: string, fields?: object) => void;
  /** How many standby VMs to keep of the shape keepStandby names (0: none). */
  standby?: number;
  /** How many images of one's own get a standby VM, the most recently started first (standby.ts; 0: none). */
  standbyImages?: number;
  /** The share of the host's cores that must be idle before a standby is made (standby.ts; default 0.5). */
  standbyIdleShare?: number;
  /** Network slots in the standby range held by VMs that were standbys (so not free for a new one). */
  standbySlotsHeld?: () => Promise<Set<number>>;
  /** The network slots standbys take (STANDBY_SLOTS unless said: a driver of builder VMs has a range of its own). */
  standbySlots?: { first: number; last: number };
  /** Another driver's VMs are starting (a driver of builders waits for the host's VMs before it makes a standby). */
  busyElsewhere?: () => boolean;
  /** Cold boots at once through run(); more wait their turn (TCG boots are CPU-bound). */
  maxConcurrentBoots?: number;
  /** Starts from a saved machine (a golden snapshot, a suspend) at once through run() and resumeSaved(): each is a fraction of a boot. */
  maxConcurrentResumes?: number;
}

export interface Handle {
  vmId: string;
  startedFrom: StartedFrom;
  pid: number;
  qmp: JsonLineChannel;
  agent: JsonLineChannel;
  /** Byte streams to the guest agent: shells, files. */
  data: DataChannel;
  /** Kept connected for the machine's life (Machine.assumePort). */
  assumePort: { destroy(): void } | null;
  facts: HelloFacts;
  stopping: boolean;
  exited: Promise<ExitInfo>;
  /**
   * The data port is in step with the guest (its sync marker seen): streams may be opened. Started by
   * the VM's first shell or file (dataReady), not by its start: under emulation a guest's first use of
   * a code path costs it a translation, and a start's CPU is what many starts at once share.
   */
  dataSynced: Promise<void> | null;
}

/** What a machine hands over once its guest is this VM (see track). */
export interface MachineParts {
  pid: number;
  qmpCh: JsonLineChannel;
  agent: JsonLineChannel;
  data: DataChannel;
  /** Kept connected for the machine's life (Machine.assumePort). */
  assumePort: { destroy(): void } | null;
}

/** How long after the last start, suspend or resume the host counts as quiet again (standbys are made only then). */
const QUIET_AFTER_START_MS = 3000;

export class RunningVms {
  readonly handles = new Map<string, Handle>();
  /** How long each part of a VM's last start took (the reconciler logs them). */
  readonly phases = new Map<string, Record<string, number>>();
  /** Starts under way, and when the last one ended: standbys are made when the host is quiet. */
  private starting = 0;
  private lastStartEnded = 0;

  constructor(
    readonly opts: DriverOptions,
    /** The driver: says `exit` and `agent-event`. */
    private readonly events: EventEmitter,
    /** Host work began (the standby pool pauses its warm-up). */
    private readonly onBusy: () => void,
  ) {}

  vmDir(vmId: string): string {
    if (!/^[A-Za-z0-9_]+$/.test(vmId)) throw new Error(`bad VM id ${vmId}`);
    return path.join(this.opts.vmsDir, vmId);
  }

  files(vmId: string): MachineFiles {
    return machineFiles(this.vmDir(vmId));
  }

  get(vmId: string): Handle | undefined {
    return this.handles.get(vmId);
  }

  /** Keeps the phases of a VM's last start, in whole milliseconds. */
  setPhases(vmId: string, phases: Record<string, number>): void {
    this.phases.set(vmId, Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v)])));
  }

  /**
   * Runs a start (or a suspend, or a resume) as host work that standbys give way to: none is made
   * while one is under way or for QUIET_AFTER_START_MS after, and a standby's warm-up pauses.
   */
  async busy<T>(work: () => Promise<T>): Promise<T> {
    this.starting++;
    this.onBusy();
    try {
      return await work();
    } finally {
      this.starting--;
      this.lastStartEnded = performance.now();
    }
  }

  /** A start ended (a standby claim counts from its end, whatever came of it). */
  startEnded(): void {
    this.lastStartEnded = performance.now();
  }

  /** No start under way, none for QUIET_AFTER_START_MS. */
  quiet(): boolean {
    return this.starting === 0 && performance.now() - this.lastStartEnded >= QUIET_AFTER_START_MS;
  }

  /** From here the machine is this running VM: its guest's events are heard, its end is said. */
  track(vmId: string, startedFrom: StartedFrom, m: MachineParts, facts: HelloFacts, exitReason: Promise<string>): void {
    const { pid, qmpCh, agent, data, assumePort } = m;
    const handle: Handle = {
      vmId,
      startedFrom,
      pid,
      qmp: qmpCh,
      agent,
      data,
      assumePort,
      facts,
      stopping: false,
      exited: machineEnded(pid, qmpCh, exitReason).then((reason) => ({ expected: handle.stopping, reason })),
      dataSynced: null,
    };
    this.handles.set(vmId, handle);
    // The guest's connections to its egress gateway (egress.ts), carried on its data port; and the
    // host's socket to it as this VM.
    void this.opts.gateway?.port.attach?.(vmId, this.files(vmId).egress).catch((err: Error) => this.opts.log?.('the gateway socket could not be made', { vm_id: vmId, err: err.message }));
    const egress = linkEgress(
      { vmId, agent, data, dataReady: () => dataReady(this, vmId), stopping: () => handle.stopping || this.handles.get(vmId) !== handle },
      this.opts.gateway?.port ?? null,
    );
    // The guest's notifications (lines with `event`): a run's output and end, for the host's recorder.
    agent.on('message', (msg: Record<string, unknown>) => {
      if (typeof msg.event !== 'string' || egress(msg)) return;
      this.events.emit('agent-event', vmId, msg);
    });
    // What a guest sends past the caps is dropped, not held (channel.ts, dataChannel.ts): said in the log.
    agent.on('overflow', (o: LineOverflow) => this.opts.log?.('the guest sent a line over the cap; it was dropped', { vm_id: vmId, chars: o.chars, request_id: o.id, cap: MAX_LINE }));
    data.on('violation', (what: string) => this.opts.log?.('the guest broke the data port protocol', { vm_id: vmId, what }));
    void handle.exited.then((info) => {
      qmpCh.close();
      agent.close();
      data.close();
      assumePort?.destroy();
      if (this.handles.get(vmId) === handle) this.handles.delete(vmId);
      this.events.emit('exit', vmId, info);
    });
  }

  /** Lets go of every VM without stopping it (server shutdown: the next server re-adopts them). */
  release(): void {
    for (const h of this.handles.values()) {
      h.stopping = true;
      h.qmp.removeAllListeners('close');
      h.qmp.close();
      h.agent.close();
      h.data.close({ error: 'vm_not_running', message: 'the VM host is restarting' });
      h.assumePort?.destroy();
    }
    this.handles.clear();
  }
}

/** Turns to start a VM: cold boots and starts from a saved machine each have their own number at once. */
export class StartTurns {
  private readonly pools = { boot: { busy: 0, queue: [] as Array<() => void> }, resume: { busy: 0, queue: [] as Array<() => void> } };

  constructor(private readonly limits: { boot: number; resume: number }) {}

  /** Waits for a turn; answers how to give it back. */
  take(kind: 'boot' | 'resume'): Promise<() => void> {
    const pool = this.pools[kind];
    const release = () => {
      pool.busy--;
      pool.queue.shift()?.();
    };
    if (pool.busy < this.limits[kind]) {
      pool.busy++;
      return Promise.resolve(release);
    }
    return new Promise((resolve) => pool.queue.push(() => (pool.busy++, resolve(release))));
  }
}
