/**
 * What the host's reconciler asks of a VM driver: a few coarse calls that bring one VM to where it
 * should be (running from this spec, suspended, stopped, gone) and its facts. QemuDriver (qemu.ts)
 * is the real one; test/fakeDriver.ts keeps the same promises in memory for the reconciler's tests.
 */
import type { HelloFacts } from '../wire/protocol.ts';
import type { Image } from '../image/build.ts';
import type { SuspendRecord } from './suspendRecord.ts';

export interface VmSpec {
  vmId: string;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  image: Image;
  /** Picks the VM's private network; distinct per VM on a host. */
  netSlot: number;
  hostname: string;
  /** A template's disk image: the persist disk starts as its copy-on-write child. */
  persistBacking?: string | null;
  /** An image's root layer: the root's writable layer starts as its copy-on-write child (and again at each fresh root). */
  upperBacking?: string | null;
}

export interface ExitInfo {
  expected: boolean;
  reason: string;
}

/** Where a VM starts from: a snapshot's saved machine, or a cold boot. */
export interface SnapshotFiles {
  key: string;
  /** Guest RAM: the golden VM's (shared), each clone's copy-on-write mapping of it (private). */
  mem: string;
  /** Device state, written by the golden VM's migration. */
  state: string;
}

/** Finds snapshots for a VM's shape and learns of ones that fail (implemented by SnapshotStore). */
export interface SnapshotSource {
  find(spec: VmSpec): Promise<SnapshotFiles | null>;
  /** Whether a start of this shape would find its snapshot now (nothing is built for asking). */
  has(spec: VmSpec): Promise<boolean>;
  failed(snap: SnapshotFiles, err: Error): void;
}

/**
 * How the running VM came up: resumed from its shape's golden snapshot, booted cold, resumed from its
 * own suspend, or a standby it took over (a clone made ahead of need).
 */
export type StartedFrom = 'snapshot' | 'cold' | 'suspended' | 'standby';

/**
 * What of a VM is on this host: a QEMU this driver runs; its saved memory and no QEMU of ours; a QEMU
 * of its directory this driver does not run (one an adoption let go of); nothing.
 */
export type ActualState = 'running' | 'suspended' | 'stray' | 'off';

/** A VM brought up: its guest's facts, its address, and where it started from. */
export interface Started {
  facts: HelloFacts;
  ipv4: string;
  /** Unset when its QEMU has ended already. */
  startedFrom?: StartedFrom;
  /** Set when the VM took a standby: the standby's network slot is the VM's now (the caller records it). */
  netSlot?: number;
}

/** A resume from saved memory: running, or the memory could not be used (why; the VM then boots from its disks). */
export type Resumed = { resumed: true; up: Started } | { resumed: false; damage: string };

/** The machine a saved memory belongs to (a resume checks it). */
export interface SavedMachine {
  imageId: string;
  vcpus: number;
  memoryMib: number;
}

export interface VmDriver {
  /** What of the VM is on this host now. */
  actual(vmId: string): Promise<ActualState>;
  /** Whether this driver runs the VM (synchronous: the reconciler's scan and its metering ask it). */
  isRunning(vmId: string): boolean;
  /**
   * After a restart of the host process: takes over the QEMUs of `known` VMs an earlier process left
   * running, ends standbys no VM took, and removes VM directories no known VM owns. Answers how many it adopted.
   */
  takeOver(known: string[]): Promise<number>;
  /**
   * Running from `spec`: whatever runs of the VM is ended and its saved memory forgotten; a new VM may
   * take a standby (not with `fresh`); else its disks are made (a fresh root layer with `fresh`) and it
   * starts. Throws when it could not start (the message says why).
   */
  run(spec: VmSpec, opts: { fresh: boolean }): Promise<Started>;
  /** Running from its saved memory. Throws when resuming failed while the memory stays usable. */
  resumeSaved(spec: VmSpec): Promise<Resumed>;
  /** Saved and its QEMU gone; throws when saving failed (the VM may run on: see isRunning). */
  suspend(vmId: string, machine: SavedMachine): Promise<SuspendRecord>;
  /** No QEMU and no saved memory; its disks stay. */
  halt(vmId: string): Promise<void>;
  /** Gone, with every disk. */
  destroy(vmId: string): Promise<void>;
  facts(vmId: string): HelloFacts | undefined;
  startedFrom(vmId: string): StartedFrom | undefined;
  /** How long each part of a VM's last start, suspend or resume took (logged). */
  readonly phases: ReadonlyMap<string, Record<string, number>>;
  /** A QEMU ended (`expected`: this driver ended it). */
  on(event: 'exit', listener: (vmId: string, info: ExitInfo) => void): unknown;
}
