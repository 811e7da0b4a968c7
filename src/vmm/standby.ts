/**
 * Standby VMs: clones of a shape's golden VM resumed ahead of need, with fresh disks mounted, a
 * provisional identity, and one run behind them, their assume program waiting for a second line.
 * A new VM of the shape takes one (QemuDriver.claimStandby): its start is that line, tens of
 * milliseconds, in place of a clone's whole start. Each lives in a directory of its own (sb_<hex>
 * under the VMs' directory) on a network slot of the standby range; the VM that takes it gets a link
 * of its name to that directory and keeps the slot.
 *
 * The pool is refilled one standby at a time, and only while the host is quiet: no start under way or
 * ended in the last 3 s, and at least half its cores idle (three quarters was never reached on 2 cores with 20
 * idle VMs, about 10–35 ms of CPU a second each). A standby is made with what nothing else wants:
 * its warm-up (most of its making) is paused (QMP `stop`) as soon as the host is busy again, and goes
 * on once it is quiet.
 *
 * Besides the shape the host names (keep), the pool keeps one standby each for the images of one's
 * own (a Dockerfile's root layer over the base image) that new VMs started from most recently
 * (noteStart, up to `imageStandbys`): the second VM of such an image starts as fast as a base VM.
 * A standby of an image whose layer is gone (the image deleted, its layer collected) is ended.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { STANDBY_SLOTS } from './commandLine.ts';
import { killMachine, machineFiles, machinePid, type Machine } from './machine.ts';
import type { ProcessOpen } from '../wire/protocol.ts';
import type { MuxStream } from '../wire/muxStream.ts';
import { keepProcess, warmUp } from './standbyWarmUp.ts';
import type { Image } from '../image/build.ts';

/** The shape standby VMs are kept of: a new VM of exactly this (and no template) takes one. */
export interface StandbyShape {
  image: Image;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  /** The root layer of an image of one's own (its VMs' upper disk backs onto it); none: the base image. */
  upperBacking?: string | null;
  /**
   * A program the warm-up starts last and leaves running on a stream of its own (an image build's
   * shell): the VM that takes the standby follows it by its pid (attachProcess) instead of starting one.
   */
  process?: ProcessOpen;
}

export interface Standby {
  id: string;
  key: string;
  netSlot: number;
  m: Machine;
  /** StandbyShape.process's pid, and its stream (kept open: a stream the host cuts hangs it up). */
  kept?: { pid: number; stream: MuxStream };
  /** How long each part of making it took. */
  phases: Record<string, number>;
}

export const STANDBY_DIR = /^sb_[0-9a-f]+$/;

export function standbyKey(s: StandbyShape): string {
  const key = `${s.image.id}/${s.vcpus}/${s.memoryMib}/${s.diskGib}`;
  return s.upperBacking ? `${key}/${s.upperBacking}` : key;
}

export interface StandbyPoolDeps {
  vmsDir: string;
  /** Whether the shape's golden snapshot is there to clone (nothing is built for asking). */
  hasSnapshot(shape: StandbyShape): Promise<boolean>;
  /**
   * Resumes a clone of the shape's golden VM as `id` on `netSlot`, with fresh disks, and has it take a
   * provisional identity with its assume program left waiting for a second line.
   */
  launch(id: string, shape: StandbyShape, netSlot: number): Promise<{ m: Machine; phases: Record<string, number> }>;
  /** Network slots of the standby range that VMs hold (running, or recorded on their rows). */
  slotsInUse(): Promise<Set<number>>;
  /** No VM start under way, and none just ended. */
  quiet(): boolean;
  /** How many of the host's cores were idle over the next `ms` (the host's own count, /proc/stat, unless given). */
  idleCores?: (ms: number) => Promise<number>;
  /** The share of the cores that must be idle before a standby is made (default 0.5; 0: whatever the load). */
  idleShare?: number;
  /** The network slots standbys take (STANDBY_SLOTS unless said). */
  slots?: { first: number; last: number };
  /** How many images of one's own get a standby, the most recently started first (default 0: none). */
  imageStandbys?: number;
  log?: (msg: string, fields?: object) => void;
}

export class StandbyPool {
  private readonly ready: Standby[] = [];
  /** Standbys being made: their directories are not left over. */
  private readonly making = new Set<string>();
  /** The machine of the standby being warmed up (one at a time). */
  private warming: Machine | null = null;
  private shape: StandbyShape | null = null;
  private wanted = 0;
  /** Shapes of images of one's own that new VMs started from, the most recent first (one standby each). */
  private images: StandbyShape[] = [];
  private imageMax: number;
  private filling: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly d: StandbyPoolDeps) {
    this.imageMax = d.imageStandbys ?? 0;
  }

  /**
   * Keeps `count` standbys of `shape` (null: none), and one each of the `images` images of one's own
   * last started (unchanged when not given); the others are ended.
   */
  keep(shape: StandbyShape | null, count: number, images?: number): void {
    this.shape = shape;
    this.wanted = shape ? count : 0;
    if (images !== undefined) {
      this.imageMax = images;
      this.images = this.images.slice(0, images);
    }
    this.trim();
  }

  /**
   * A new VM is starting: when it is of an image of one's own, that image's shape is the most recent
   * one (kept first; the oldest beyond `imageStandbys` goes).
   */
  noteStart(spec: StandbyShape & { persistBacking?: string | null }): void {
    const max = this.imageMax;
    if (!spec.upperBacking || spec.persistBacking || max <= 0) return;
    const shape: StandbyShape = { image: spec.image, vcpus: spec.vcpus, memoryMib: spec.memoryMib, diskGib: spec.diskGib, upperBacking: spec.upperBacking };
    const key = standbyKey(shape);
    if (this.images[0] && standbyKey(this.images[0]) === key) return;
    this.images = [shape, ...this.images.filter((s) => standbyKey(s) !== key)].slice(0, max);
    this.trim();
  }

  /** How many of each wanted shape, the host's first; an image whose layer is gone is no longer wanted. */
  private wants(): { shape: StandbyShape; key: string; count: number }[] {
    this.images = this.images.filter((s) => existsSync(s.upperBacking!));
    const out = this.shape && this.wanted > 0 ? [{ shape: this.shape, key: standbyKey(this.shape), count: this.wanted }] : [];
    for (const shape of this.images) out.push({ shape, key: standbyKey(shape), count: 1 });
    return out;
  }

  /** Ends the standbys beyond what is wanted of their shape, and makes what is missing. */
  private trim(): void {
    this.dropUnwanted();
    this.fill();
  }

  private dropUnwanted(): void {
    const left = new Map(this.wants().map((w) => [w.key, w.count]));
    for (const s of [...this.ready]) {
      const n = left.get(s.key) ?? 0;
      if (n > 0) left.set(s.key, n - 1);
      else void this.drop(s);
    }
  }

  /** The first wanted shape (the host's, then the images', the latest first) with fewer standbys ready than wanted. */
  private missing(): StandbyShape | null {
    for (const w of this.wants()) if (this.ready.filter((s) => s.key === w.key).length < w.count) return w.shape;
    return null;
  }

  get keptShape(): StandbyShape | null {
    return this.shape;
  }

  /** Standbys ready now, of every shape (imageCount: of images of one's own). */
  get count(): number {
    return this.ready.length;
  }

  get imageCount(): number {
    const keys = new Set(this.images.map(standbyKey));
    return this.ready.filter((s) => keys.has(s.key)).length;
  }

  has(key: string): boolean {
    return this.ready.some((s) => s.key === key);
  }

  /** Whether enough of the host's cores are idle to make a standby now. */
  private async idleEnough(): Promise<boolean> {
    const share = this.d.idleShare ?? 0.5;
    if (share <= 0) return true;
    return (await (this.d.idleCores ?? idleCores)(500)) >= Math.max(1, os.availableParallelism() * share);
  }

  /** A ready standby of this shape, no longer the pool's (the caller makes it a VM or ends it). */
  take(key: string): Standby | null {
    const i = this.ready.findIndex((s) => s.key === key);
    return i < 0 ? null : this.ready.splice(i, 1)[0];
  }

  /** Makes standbys until there are as many as wanted (one at a time, while the host is quiet). */
  fill(): void {
    if (this.filling) return;
    this.filling = (async () => {
      let failures = 0;
      // Waits up to `ms`, less when the pool is closing.
      const pause = async (ms: number) => {
        for (const end = performance.now() + ms; performance.now() < end && !this.closed; ) await sleep(200);
      };
      for (;;) {
        if (this.closed) return;
        this.dropUnwanted();
        const shape = this.missing();
        if (!shape) return;
        // Quiet before and after the look at the cores: a start that began meanwhile comes first.
        if (!this.d.quiet() || !(await this.idleEnough()) || !this.d.quiet()) {
          await pause(200);
          continue;
        }
        // No snapshot of the shape yet (being made, or made again after it failed): look again later.
        if (!(await this.d.hasSnapshot(shape))) {
          await pause(5000);
          continue;
        }
        try {
          await this.make(shape);
          failures = 0;
        } catch (err) {
          if (this.closed) return;
          failures++;
          this.d.log?.('making a standby VM failed', { err: (err as Error).message, failures });
          await pause(Math.min(300_000, 5000 * 2 ** failures));
        }
      }
    })().finally(() => (this.filling = null));
  }

  /** Ends every standby and makes no more (the server is stopping: no VM is theirs, nothing is lost). */
  async close(): Promise<void> {
    this.closed = true;
    // Its warm-up fails at once (the machine is gone), and its making ends it (make's catch).
    await this.warming?.kill();
    await this.filling;
    await Promise.all([...this.ready].map((s) => this.drop(s)));
  }

  /**
   * Removes standby directories no VM took and this pool does not own (an earlier server's, whose QEMU
   * is ended with them). A directory a VM's link names is that VM's.
   */
  async sweep(): Promise<void> {
    const names = await readdir(this.d.vmsDir).catch(() => [] as string[]);
    const taken = new Set<string>();
    for (const n of names) {
      if (!/^vm_/.test(n)) continue;
      const target = await readlink(path.join(this.d.vmsDir, n)).catch(() => null);
      if (target) taken.add(target);
    }
    const mine = new Set([...this.ready.map((s) => s.id), ...this.making]);
    for (const n of names) {
      if (!STANDBY_DIR.test(n) || taken.has(n) || mine.has(n)) continue;
      const f = machineFiles(path.join(this.d.vmsDir, n));
      const pid = await machinePid(f);
      if (pid) await killMachine(f, pid);
      await rm(f.dir, { recursive: true, force: true });
    }
  }

  private async make(shape: StandbyShape): Promise<void> {
    const id = `sb_${randomBytes(8).toString('hex')}`;
    const dir = path.join(this.d.vmsDir, id);
    this.making.add(id);
    let m: Machine | null = null;
    try {
      const netSlot = await this.freeSlot();
      const launched = await this.d.launch(id, shape, netSlot);
      m = launched.m;
      // The server is stopping: a standby being warmed up is ended now, not made whole first.
      if (this.closed) throw new Error('no longer wanted');
      this.warming = m;
      const t = performance.now();
      // The warm-up is most of a standby's making: it is paused while a start is under way or has just
      // ended (a start's first work comes right after it), so that it never takes CPU from a VM.
      const hold = this.holdWhileBusy(m);
      let kept: Standby['kept'];
      try {
        await warmUp(m, hold.pausedMs, { anyExit: !!shape.upperBacking });
        if (shape.process) kept = await keepProcess(m, shape.process);
      } finally {
        await hold.end();
      }
      const standby: Standby = {
        id,
        key: standbyKey(shape),
        netSlot,
        m,
        kept,
        phases: { ...launched.phases, warm_ms: performance.now() - t - hold.pausedMs(), paused_ms: hold.pausedMs() },
      };
      if (this.closed || !this.wants().some((w) => w.key === standbyKey(shape))) throw new Error('no longer wanted');
      this.ready.push(standby);
      void m.exit.then((reason) => {
        const i = this.ready.indexOf(standby);
        if (i < 0) return;
        this.ready.splice(i, 1);
        this.d.log?.('a standby VM ended', { standby: id, reason });
        void rm(dir, { recursive: true, force: true });
      });
    } catch (err) {
      await m?.kill();
      await rm(dir, { recursive: true, force: true });
      throw err;
    } finally {
      if (this.warming === m) this.warming = null;
      this.making.delete(id);
    }
  }

  /** A start began: a standby being warmed up is paused now rather than at the next look. */
  busy(): void {
    this.wakeHold?.();
  }

  private wakeHold: (() => void) | null = null;

  /**
   * Pauses the machine's guest (QMP `stop`: its clock stands still too) while the host is not quiet,
   * and lets it run on (`cont`) once it is, until `end`. Answers how long it has been paused so far.
   */
  private holdWhileBusy(m: Machine): { pausedMs: () => number; end: () => Promise<void> } {
    let paused = false;
    let pausedAt = 0;
    let pausedTotal = 0;
    let ended = false;
    let wake: () => void = () => undefined;
    const loop = (async () => {
      while (!ended) {
        const want = !this.d.quiet() && !this.closed;
        if (want !== paused) {
          const ok = await m.qmp(want ? 'stop' : 'cont').then(
            () => true,
            () => false,
          );
          if (ok) {
            paused = want;
            if (want) pausedAt = performance.now();
            else pausedTotal += performance.now() - pausedAt;
          }
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
      if (paused) {
        await m.qmp('cont').catch(() => undefined);
        pausedTotal += performance.now() - pausedAt;
        paused = false;
      }
    })();
    this.wakeHold = () => wake();
    return {
      pausedMs: () => pausedTotal + (paused ? performance.now() - pausedAt : 0),
      end: async () => {
        ended = true;
        wake();
        this.wakeHold = null;
        await loop;
      },
    };
  }

  private async drop(s: Standby): Promise<void> {
    const i = this.ready.indexOf(s);
    if (i >= 0) this.ready.splice(i, 1);
    await s.m.kill();
    await rm(path.join(this.d.vmsDir, s.id), { recursive: true, force: true });
  }

  private async freeSlot(): Promise<number> {
    const held = await this.d.slotsInUse();
    for (const s of this.ready) held.add(s.netSlot);
    const { first, last } = this.d.slots ?? STANDBY_SLOTS;
    for (let slot = first; slot <= last; slot++) if (!held.has(slot)) return slot;
    throw new Error('every standby network slot is taken');
  }
}

/** The host's CPU time, busy and idle, in clock ticks (/proc/stat). */
async function cpuTicks(): Promise<{ busy: number; idle: number }> {
  const line = (await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n')[0] ?? '';
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: user + nice + system + irq + softirq + steal, idle: idle + iowait };
}

/** How many of the host's cores were idle over the next `ms` (all of them when /proc/stat cannot be read). */
async function idleCores(ms: number): Promise<number> {
  const a = await cpuTicks();
  await sleep(ms);
  const b = await cpuTicks();
  const total = b.busy - a.busy + (b.idle - a.idle);
  const cores = os.availableParallelism();
  return total > 0 && Number.isFinite(total) ? (cores * (b.idle - a.idle)) / total : cores;
}
