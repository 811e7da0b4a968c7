/**
 * The runs a guest owns (see RunStartArgs in protocol.ts): each a process group of the harness user,
 * its output numbered in chunks and kept, with how it ended, until the host has acknowledged them.
 * The host may come and go (a restart of the server or host); the run goes on and the host asks for
 * what it missed. Only Node built-ins here: this file is bundled into the guest image.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import {
  truncationNote,
  type RunChunk,
  type RunEnd,
  type RunEndEvent,
  type RunOutputEvent,
  type RunStartArgs,
  type RunStream,
  type RunSyncAnswer,
} from '../wire/protocol.ts';

/** How a run's process starts: its user, directory and whole environment. */
export interface Spawning {
  cwd: string;
  env: Record<string, string>;
  uid: number;
  gid: number;
}

interface GuestRun {
  id: string;
  child: ChildProcess | null;
  /** Chunks not yet acknowledged by the host. */
  chunks: RunChunk[];
  seq: number;
  end: RunEnd | null;
  cancelled: boolean;
  timedOut: boolean;
  started: number;
  firstOutputMs: number | null;
}

const STREAMS: RunStream[] = ['stdout', 'stderr'];

export class GuestRuns {
  private readonly runs = new Map<string, GuestRun>();

  constructor(
    /** Sends a notification line to the host (dropped when no host listens: it asks again). */
    private readonly notify: (msg: RunOutputEvent | RunEndEvent) => void,
    private readonly log: (msg: string) => void,
  ) {}

  /** Starts the run, or answers the one already started under this id. */
  start(args: RunStartArgs, how: Spawning): { started: boolean; last_seq: number; ended: boolean } {
    const known = this.runs.get(args.run_id);
    if (known) return { started: false, last_seq: known.seq, ended: known.end !== null };
    if (typeof args.run_id !== 'string' || !/^run_[A-Za-z0-9]+$/.test(args.run_id)) throw new Error('bad run id');
    if (!Array.isArray(args.argv) || args.argv.length === 0 || !args.argv.every((a) => typeof a === 'string')) {
      throw new Error('argv must be a non-empty array of strings');
    }
    const run: GuestRun = { id: args.run_id, child: null, chunks: [], seq: 0, end: null, cancelled: false, timedOut: false, started: Date.now(), firstOutputMs: null };
    this.runs.set(run.id, run);
    const max = args.max_output_bytes;
    const child = spawn(args.argv[0], args.argv.slice(1), { ...how, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    run.child = child;
    const kept = { stdout: 0, stderr: 0 };
    const dropped = { stdout: 0, stderr: 0 };
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    const emit = (stream: RunStream, text: string) => {
      if (!text) return;
      run.firstOutputMs ??= Date.now() - run.started;
      const chunk: RunChunk = { seq: ++run.seq, stream, text };
      run.chunks.push(chunk);
      this.notify({ event: 'run_output', run_id: run.id, ...chunk });
    };
    for (const stream of STREAMS) {
      child[stream]!.on('data', (data: Buffer) => {
        const room = max - kept[stream];
        if (room <= 0) {
          dropped[stream] += data.length;
          return;
        }
        const part = data.length > room ? data.subarray(0, room) : data;
        kept[stream] += part.length;
        dropped[stream] += data.length - part.length;
        emit(stream, decoders[stream].write(part) + (kept[stream] >= max ? decoders[stream].end() : ''));
      });
    }
    const timer = setTimeout(() => ((run.timedOut = true), killGroup(child)), args.timeout_ms);
    child.stdin!.on('error', () => undefined);
    child.stdin!.end();
    let finished = false;
    const finish = (code: number | null, signal: string | null) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      killGroup(child); // nothing the task started outlives it
      for (const stream of STREAMS) {
        emit(stream, decoders[stream].end());
        if (dropped[stream] > 0) emit(stream, truncationNote(dropped[stream]));
      }
      run.child = null;
      run.end = {
        exit_code: code,
        signal,
        timed_out: run.timedOut,
        cancelled: run.cancelled,
        duration_ms: Date.now() - run.started,
        first_output_ms: run.firstOutputMs,
      };
      this.notify({ event: 'run_end', run_id: run.id, last_seq: run.seq, end: run.end });
    };
    child.on('error', (err) => {
      emit('stderr', `${err.message}\n`);
      finish(127, null);
    });
    // Its output ends when every process holding the pipes is gone: the task's own exit ends the group.
    child.on('exit', () => killGroup(child));
    child.on('close', (code, signal) => finish(code, signal));
    return { started: true, last_seq: 0, ended: false };
  }

  /** What the host has not acknowledged after `after`, and how the run ended if it did. */
  sync(runId: string, after: number): RunSyncAnswer {
    const run = this.runs.get(runId);
    if (!run) return { known: false, chunks: [], last_seq: 0, end: null };
    return { known: true, chunks: run.chunks.filter((c) => c.seq > after), last_seq: run.seq, end: run.end };
  }

  /** The host has stored the chunks up to `seq` (and, with `done`, the end): they are let go. */
  ack(runId: string, seq: number, done: boolean): void {
    const run = this.runs.get(runId);
    if (!run) return;
    run.chunks = run.chunks.filter((c) => c.seq > seq);
    if (done && run.end) this.runs.delete(runId);
  }

  /** Kills the run's whole process group; its end follows as `run_end` with `cancelled`. */
  cancel(runId: string): { cancelled: boolean } {
    const run = this.runs.get(runId);
    if (!run || run.end || !run.child) return { cancelled: false };
    run.cancelled = true;
    killGroup(run.child);
    this.log(`run ${runId} cancelled`);
    return { cancelled: true };
  }
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}
