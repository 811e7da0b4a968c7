/**
 * The VM host's side of runs as records. For each VM here it starts the oldest queued run when none
 * runs (whichever replica queued it), stores what the guest prints as it comes, acknowledges it to
 * the guest (which keeps it until then), and ends the run as the guest says it ended. After a restart
 * of this process it asks each guest for what it missed (`run_sync`); a run whose guest went away
 * (the VM stopped, restarted or crashed) ends `lost` with what was stored.
 *
 * Each run's records are written by one chain at a time (a RunTrack), each VM's dispatch likewise.
 *
 * The guest is not trusted to keep to the run's output cap: each stream keeps at most the run's
 * `max_output_bytes` characters here too (the guest counts bytes; a byte never decodes to more than
 * one character), and the guest's own truncation note. What a guest sends past that is dropped, and
 * the run ends with a note of how much. Chunks heard and not yet stored are held up to twice the cap;
 * beyond that they are dropped and asked for again once the store has caught up.
 */
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import type { RunFeed } from '../feeds/runFeed.ts';
import type { QemuDriver } from '../vmm/qemu.ts';
import { truncationNote, type RunChunk, type RunEnd, type RunEndEvent, type RunOutputEvent, type RunStartArgs, type RunStream, type RunSyncAnswer } from '../wire/protocol.ts';
import * as runStore from '../store/runs.ts';
import type { RunEnding, RunStatus, RunWork } from '../store/runs.ts';
import { recordRunFinished } from '../domain/events.ts';

export interface RunRecorderOptions {
  db: Db;
  clock: Clock;
  driver: QemuDriver;
  hostId: string;
  feed: RunFeed;
  log: Logger;
  /** How often every VM with unfinished runs is looked at (a missed kick, a guest gone quietly). */
  sweepMs?: number;
}

/** One run being recorded in this process. */
interface RunTrack {
  runId: string;
  vmId: string;
  /** The last seq stored. */
  stored: number;
  /** Chunks heard, not yet stored. */
  heard: RunChunk[];
  end: { last_seq: number; end: RunEnd } | null;
  /** Ask the guest for what it has (a gap, a start of following). */
  resync: boolean;
  busy: boolean;
  again: boolean;
  /** The run's output cap, a stream. */
  max: number;
  /** Characters of each stream stored (loaded from the store when the track starts). */
  kept: Record<RunStream, number> | null;
  /** Characters of each stream dropped here, past the cap. */
  cut: Record<RunStream, number>;
  /** Whether a stream's truncation note (the guest's) is stored. */
  noted: Record<RunStream, boolean>;
  /** Characters in `heard`. */
  heardChars: number;
  /** When the guest last said something of the run (or was asked). */
  heardAt: number;
}

/** A running run the guest says nothing of for this long is asked for (run_sync) on the next sweep. */
const QUIET_RESYNC_MS = 30_000;

/** The guest's note at the end of a stream that passed its cap. */
const NOTE = /^\n\[agentvm: output truncated: \d+ more bytes were not kept\]\n$/;

/** The first `room` characters of `text`, not splitting a surrogate pair. */
function cutText(text: string, room: number): string {
  if (room <= 0) return '';
  let end = room;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}

function statusOf(end: RunEnd): RunStatus {
  if (end.cancelled) return 'cancelled';
  if (end.timed_out) return 'timed_out';
  return end.exit_code === 0 ? 'succeeded' : 'failed';
}

export class RunRecorder {
  private readonly tracks = new Map<string, RunTrack>();
  private readonly dispatching = new Map<string, { running: boolean; again: boolean }>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly onEvent = (vmId: string, msg: Record<string, unknown>) => this.heard(vmId, msg);
  private readonly onExit = (vmId: string) => {
    // What was heard over the ended connection is asked for again once the VM is back (a resume).
    for (const [runId, t] of this.tracks) if (t.vmId === vmId && !t.busy) this.tracks.delete(runId);
    this.kick(vmId);
  };

  constructor(private readonly o: RunRecorderOptions) {}

  /** Starts following: call once the VMs an earlier process left running are adopted. */
  start(): void {
    this.o.driver.on('agent-event', this.onEvent);
    this.o.driver.on('exit', this.onExit);
    this.timer = setInterval(() => void this.sweep(), this.o.sweepMs ?? 1000);
    void this.sweep();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.o.driver.off('agent-event', this.onEvent);
    this.o.driver.off('exit', this.onExit);
    // Writes under way finish (the guest keeps anything not acknowledged for the next process).
    for (let i = 0; i < 100 && ([...this.tracks.values()].some((t) => t.busy) || [...this.dispatching.values()].some((d) => d.running)); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Something changed for the VM's runs (one queued, the VM exited): look at them soon. */
  kick(vmId: string): void {
    if (this.stopped) return;
    const d = this.dispatching.get(vmId) ?? { running: false, again: false };
    this.dispatching.set(vmId, d);
    if (d.running) {
      d.again = true;
      return;
    }
    d.running = true;
    void (async () => {
      do {
        d.again = false;
        await this.tend(vmId).catch((err) => this.o.log.warn({ err, vm_id: vmId }, 'tending runs failed'));
      } while (d.again && !this.stopped);
      d.running = false;
      this.dispatching.delete(vmId);
    })();
  }

  /** Kills a running run's process group in its guest; its end comes back as `cancelled`. */
  async cancel(vmId: string, runId: string): Promise<void> {
    await this.o.driver.request(vmId, 'run_cancel', { run_id: runId }, 5000);
  }

  private async sweep(): Promise<void> {
    if (this.stopped) return;
    const work = await runStore.unfinishedOnHost(this.o.db, this.o.hostId).catch(() => [] as RunWork[]);
    for (const vmId of new Set(work.map((w) => w.vm_id))) this.kick(vmId);
  }

  /** The VM's unfinished runs: lost ones end, running ones are followed, the next queued one starts. */
  private async tend(vmId: string): Promise<void> {
    const { db, driver } = this.o;
    const up = driver.isRunning(vmId);
    // Suspended (or being resumed): its guest keeps its runs, queued and running, for when it is back.
    if (!up && driver.holdsMemory(vmId)) return;
    let running = false;
    for (const run of await runStore.unfinishedOfVm(db, vmId)) {
      if (this.stopped || run.host_id !== this.o.hostId) return;
      const rebooted = run.boots !== run.vm_boots;
      if (run.status === 'running') {
        if (!up || rebooted) await this.lose(run, rebooted ? 'the VM restarted under the run' : 'the VM stopped under the run');
        else {
          running = true;
          this.follow(run);
        }
      } else if (!up || rebooted) {
        await this.lose(run, 'the VM stopped before the run started');
      } else if (!running && run.vm_status === 'running') {
        running = await this.dispatch(run);
      }
    }
  }

  /** Starts a queued run in its guest (again, after a restart: the guest knows it by id). */
  private async dispatch(run: RunWork): Promise<boolean> {
    const track = this.track(run.run_id, run.vm_id, run.last_seq, run.max_output_bytes);
    const args: RunStartArgs = { run_id: run.run_id, argv: run.argv, env: run.env, timeout_ms: run.timeout_ms, max_output_bytes: run.max_output_bytes };
    let answer: { started?: boolean } | undefined;
    try {
      answer = await this.o.driver.request<{ started?: boolean }>(run.vm_id, 'run_start', args, 30_000);
    } catch (err) {
      this.tracks.delete(run.run_id);
      // The guest is not answering: the next look decides (the VM may be stopping).
      this.o.log.warn({ err, run_id: run.run_id, vm_id: run.vm_id }, 'starting a run in its guest failed');
      return false;
    }
    if (!(await runStore.markRunning(this.o.db, run.run_id, this.o.clock.now()))) {
      // Cancelled while it was being started.
      this.tracks.delete(run.run_id);
      await this.cancel(run.vm_id, run.run_id).catch(() => undefined);
      return false;
    }
    void this.o.feed.publish({ run_id: run.run_id }).catch(() => undefined);
    // The guest had it already (a process before this one sent the start and died before marking it
    // running): what it printed, and its end, went to that process. Asked for now.
    if (answer?.started === false) track.resync = true;
    this.flush(track);
    return true;
  }

  /** Follows a running run this process is not yet following: what the guest has comes first. */
  private follow(run: RunWork): void {
    const known = this.tracks.get(run.run_id);
    if (known) {
      // Silent a while: the guest is asked what it has (a notification lost on the way costs no more than this).
      if (!known.busy && Date.now() - known.heardAt > QUIET_RESYNC_MS) {
        known.heardAt = Date.now();
        known.resync = true;
        this.flush(known);
      }
      return;
    }
    const track = this.track(run.run_id, run.vm_id, run.last_seq, run.max_output_bytes);
    track.resync = true;
    this.flush(track);
  }

  private track(runId: string, vmId: string, stored: number, max: number): RunTrack {
    let t = this.tracks.get(runId);
    if (!t) {
      t = {
        runId,
        vmId,
        stored,
        heard: [],
        end: null,
        resync: false,
        busy: false,
        again: false,
        max,
        kept: null,
        cut: { stdout: 0, stderr: 0 },
        noted: { stdout: false, stderr: false },
        heardChars: 0,
        heardAt: Date.now(),
      };
      this.tracks.set(runId, t);
    }
    return t;
  }

  private heard(vmId: string, msg: Record<string, unknown>): void {
    const t = typeof msg.run_id === 'string' ? this.tracks.get(msg.run_id) : undefined;
    if (!t || t.vmId !== vmId) {
      // Not followed here yet (this process just started): the next look follows it from the guest.
      if (msg.event === 'run_output' || msg.event === 'run_end') this.kick(vmId);
      return;
    }
    t.heardAt = Date.now();
    if (msg.event === 'run_output') {
      const e = msg as unknown as RunOutputEvent;
      if (!Number.isInteger(e.seq) || (e.stream !== 'stdout' && e.stream !== 'stderr') || typeof e.text !== 'string') return;
      if (t.heardChars + e.text.length > 2 * t.max + 64 * 1024) {
        // More than the store has taken yet, and more than an honest guest has to send: asked for
        // again (the guest keeps what is not acknowledged) once what is held is stored.
        t.resync = true;
      } else {
        t.heard.push({ seq: e.seq, stream: e.stream, text: e.text });
        t.heardChars += e.text.length;
      }
    } else if (msg.event === 'run_end') {
      const e = msg as unknown as RunEndEvent;
      t.end = { last_seq: e.last_seq, end: e.end };
    } else return;
    this.flush(t);
  }

  /** Stores what is in order, asks the guest for what is missing, and ends the run when all is in. */
  private flush(t: RunTrack): void {
    if (t.busy) {
      t.again = true;
      return;
    }
    t.busy = true;
    void (async () => {
      try {
        do {
          t.again = false;
          await this.step(t);
        } while (t.again && !this.stopped && this.tracks.get(t.runId) === t);
      } catch (err) {
        this.o.log.warn({ err, run_id: t.runId }, 'recording a run failed; asking its guest again');
        t.resync = true;
        setTimeout(() => this.flush(t), 1000).unref();
      } finally {
        t.busy = false;
      }
    })();
  }

  private async step(t: RunTrack): Promise<void> {
    const { db, driver, feed } = this.o;
    t.heard.sort((a, b) => a.seq - b.seq);
    t.heard = t.heard.filter((c) => c.seq > t.stored);
    t.kept ??= await runStore.storedChars(db, t.runId);
    let resynced = false;
    const gap = (t.heard.length > 0 && t.heard[0].seq !== t.stored + 1) || (t.end !== null && t.end.last_seq > t.stored && t.heard.length === 0);
    if (t.resync || gap) {
      t.resync = false;
      resynced = true;
      const answer = await driver.request<RunSyncAnswer>(t.vmId, 'run_sync', { run_id: t.runId, after: t.stored }, 15_000);
      if (!answer.known) {
        this.tracks.delete(t.runId);
        await this.lose({ run_id: t.runId, vm_id: t.vmId }, 'the guest no longer has the run (its VM booted again)');
        return;
      }
      t.heard.push(...answer.chunks.filter((c) => Number.isInteger(c?.seq) && (c.stream === 'stdout' || c.stream === 'stderr') && typeof c.text === 'string'));
      t.heard.sort((a, b) => a.seq - b.seq);
      t.heard = t.heard.filter((c, i, all) => c.seq > t.stored && (i === 0 || all[i - 1].seq !== c.seq));
      if (answer.end) t.end = { last_seq: answer.last_seq, end: answer.end };
    }
    // The chunks that follow the last stored one without a gap.
    const batch: RunChunk[] = [];
    for (const c of t.heard) {
      if (c.seq !== t.stored + batch.length + 1) break;
      batch.push(c);
    }
    if (batch.length) {
      const kept = this.capped(t, batch);
      await runStore.appendEvents(db, t.runId, kept, batch[batch.length - 1].seq);
      t.stored = batch[batch.length - 1].seq;
      t.heard = t.heard.slice(batch.length);
      t.heardChars = t.heard.reduce((n, c) => n + c.text.length, 0);
      if (kept.length) await feed.publish({ run_id: t.runId, events: kept });
      void driver.request(t.vmId, 'run_ack', { run_id: t.runId, seq: t.stored }, 10_000).catch(() => undefined);
    }
    if (t.heard.length) {
      // A gap: ask the guest on the next step; one it did not fill when asked, a second later.
      if (!resynced) t.again = true;
      else setTimeout(() => ((t.resync = true), this.flush(t)), 1000).unref();
    }
    if (t.end && t.stored >= t.end.last_seq) {
      const notes: RunChunk[] = (['stdout', 'stderr'] as const)
        .filter((s) => t.cut[s] > 0)
        .map((stream, i) => ({ seq: t.stored + i + 1, stream, text: truncationNote(t.cut[stream]) }));
      if (notes.length) {
        // Cut here: the guest did not keep to the cap. The notes come after its last chunk.
        this.o.log.warn({ run_id: t.runId, vm_id: t.vmId, dropped: t.cut, cap: t.max }, "a run's guest sent output past the cap; the rest was dropped");
        await runStore.appendEvents(db, t.runId, notes);
        t.stored = notes[notes.length - 1].seq;
        t.cut = { stdout: 0, stderr: 0 };
        await feed.publish({ run_id: t.runId, events: notes });
      }
      const e = t.end.end;
      await this.finish(t.runId, {
        status: statusOf(e),
        exit_code: e.exit_code,
        timed_out: e.timed_out,
        duration_ms: e.duration_ms,
        first_output_ms: e.first_output_ms,
        status_reason: e.cancelled ? 'cancelled' : e.timed_out ? `timed out after ${e.duration_ms} ms` : e.signal ? `killed by ${e.signal}` : null,
        finished_at: this.o.clock.now(),
      });
      this.tracks.delete(t.runId);
      await feed.publish({ run_id: t.runId, finished: true });
      void driver.request(t.vmId, 'run_ack', { run_id: t.runId, seq: t.stored, done: true }, 10_000).catch(() => undefined);
      this.kick(t.vmId); // the next queued run
    }
  }

  /** What of `batch` the cap lets through: a stream past it keeps its first characters and the guest's note. */
  private capped(t: RunTrack, batch: RunChunk[]): RunChunk[] {
    const kept = t.kept!;
    const out: RunChunk[] = [];
    for (const c of batch) {
      const s = c.stream;
      let text = c.text;
      if (text.length > t.max - kept[s]) {
        if (!t.noted[s] && NOTE.test(text)) t.noted[s] = true;
        else {
          text = cutText(text, t.max - kept[s]);
          t.cut[s] += c.text.length - text.length;
        }
      }
      kept[s] += text.length;
      if (text) out.push(text === c.text ? c : { ...c, text });
    }
    return out;
  }

  /** Ends a run and writes its run.finished event, in one transaction; false when it had ended already. */
  private finish(runId: string, ending: RunEnding): Promise<boolean> {
    return this.o.db.transaction(async (tx) => {
      const ended = await runStore.finish(tx, runId, ending);
      if (ended) await recordRunFinished(tx, runId, ending.finished_at);
      return ended;
    });
  }

  /** The run's guest went away: it ends `lost` with what was stored. */
  private async lose(run: { run_id: string; vm_id: string }, reason: string): Promise<void> {
    this.tracks.delete(run.run_id);
    const now = this.o.clock.now();
    const ended = await this.finish(run.run_id, { status: 'lost', exit_code: null, timed_out: false, duration_ms: null, first_output_ms: null, status_reason: reason, finished_at: now });
    if (ended) {
      this.o.log.info({ run_id: run.run_id, vm_id: run.vm_id, reason }, 'run lost');
      await this.o.feed.publish({ run_id: run.run_id, finished: true });
    }
  }
}
