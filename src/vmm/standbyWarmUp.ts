/**
 * A standby VM's warm-up (standby.ts): its first runs before any VM is its, and the program its shape
 * keeps running for the VM that takes it.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentRequest } from './channel.ts';
import type { Machine } from './machine.ts';
import { HARNESS_HOME, type ProcessOpen, type RunEndEvent } from '../wire/protocol.ts';
import type { StreamFault } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';
import { buildInvocation } from '../harness/invoke.ts';

/**
 * The files the echo harness's run leaves, its two counters (src/image/files/agentvm-echo): a
 * standby's warm-up removes them, so that the VM's first run counts 1.
 */
const ECHO_COUNTERS = [`${HARNESS_HOME}/.agentvm-echo-count`, '/var/lib/agentvm-echo/count'];

/**
 * A standby's first runs, before any VM is its: under emulation a guest's first use of a code path
 * costs a translation in each QEMU, and a VM's first run costs several times the next. The warm-up
 * is one run of the echo harness as a VM's run starts it (the agent's run code, a process of the
 * harness user, the awk and the counters' appends on the persist disk and the root's layer: a first
 * echo run after it took 30–45 ms in the guest against 55–105 after a run of another awk program),
 * two processes on a data stream (warmUpProcess), then a run that removes the counters and `sync`s:
 * what the standby's start and the runs left dirty is written now, while the host is idle, not 30 s
 * later (the kernel's age for dirty data) in the middle of creates. Each run is forgotten once acknowledged.
 */
export function warmUp(m: Machine, pausedMs: () => number, { anyExit = false } = {}): Promise<void> {
  return untilGone(
    m,
    (async () => {
      // `anyExit`: an image of one's own, whose USER or ENV may make the echo harness fail; its code is
      // warmed all the same.
      await warmUpRun(m, buildInvocation('echo', { task: 'warm-up' }).argv, pausedMs, anyExit);
      // Twice: the first leaves a login shell kept ready (guest/readyShell.ts), the second is what a VM's
      // first command then is (that shell takes it), and leaves the one a VM's first command takes.
      await warmUpProcess(m, pausedMs);
      await warmUpProcess(m, pausedMs);
      // As the image's USER (a standby of an image of one's own): a counter it could not write is not there.
      await warmUpRun(m, ['sh', '-c', 'rm -f -- "$@" 2>/dev/null; sync', 'sh', ...ECHO_COUNTERS], pausedMs, anyExit);
    })(),
  );
}

/** `work`, unless the machine ends first (a standby ended as the server stops): then it fails at once. */
function untilGone<T>(m: Machine, work: Promise<T>): Promise<T> {
  work.catch(() => undefined);
  return Promise.race([work, m.exit.then((reason): never => { throw new Error(`the standby's machine ended (${reason})`); })]);
}

/** Fails after 30 s of the guest running (time it was paused for a start does not count). */
function guestDeadline(pausedMs: () => number, what: string): { failed: Promise<never>; done: () => void } {
  const t0 = performance.now();
  let done = false;
  const failed = (async (): Promise<never> => {
    while (!done && performance.now() - t0 - pausedMs() < 30_000) await sleep(250);
    throw new Error(`${what} did not end`);
  })();
  failed.catch(() => undefined);
  return { failed, done: () => (done = true) };
}

/**
 * A program the guest's agent starts on a data stream, as E2B's SDK starts each command (a login bash
 * of the harness user, framed on the stream): a VM's first such process took ~100 ms more than the
 * next under emulation (measured with E2B's commands.run: 300 ms, then 195). An older guest that
 * opens a terminal in its place is let go.
 */
async function warmUpProcess(m: Machine, pausedMs: () => number): Promise<void> {
  const stream = m.data.stream();
  const ended = new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => stream.consumed(chunk.length));
    stream.on('end', () => (stream.release(), resolve()));
    stream.on('abort', (f: StreamFault) => reject(new Error(`the warm-up process was cut: ${f.message}`)));
  });
  ended.catch(() => undefined);
  const program: ProcessOpen = { argv: ['/bin/bash', '-l', '-c', ':'], env: {}, cwd: null, root: false, stdin: false };
  const r = await agentRequest<{ framed?: boolean }>(m.agent, 'shell_open', { stream: stream.id, cols: 80, rows: 24, env: {}, process: program }, 30_000);
  if (r?.framed !== true) return stream.abort({ error: 'closed', message: 'a terminal, not a process' });
  const deadline = guestDeadline(pausedMs, 'the warm-up process');
  await Promise.race([ended, deadline.failed]).finally(deadline.done);
}

/** Starts `program` on a stream of its own and answers its pid (its `P` frame) with the stream, left open. */
export async function keepProcess(m: Machine, program: ProcessOpen): Promise<{ pid: number; stream: MuxStream }> {
  const stream = m.data.stream();
  let head = Buffer.alloc(0);
  const pid = new Promise<number>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      stream.consumed(chunk.length);
      head = Buffer.concat([head, chunk]);
      const n = head.length >= 9 && head[0] === 'P'.charCodeAt(0) ? parseInt(head.subarray(1, 9).toString('latin1'), 16) : -1;
      if (n >= 0 && head.length >= 9 + n) resolve(Number(head.subarray(9, 9 + n).toString()));
    });
    stream.on('end', () => reject(new Error('the kept process ended')));
    stream.on('abort', (f: StreamFault) => reject(new Error(`the kept process was cut: ${f.message}`)));
  });
  pid.catch(() => undefined);
  const r = await agentRequest<{ framed?: boolean }>(m.agent, 'shell_open', { stream: stream.id, cols: 80, rows: 24, env: {}, process: program }, 30_000);
  if (r?.framed !== true) {
    stream.abort({ error: 'closed', message: 'a terminal, not a process' });
    throw new Error("the guest's agent cannot start a program on a stream");
  }
  return { pid: await untilGone(m, pid), stream };
}

async function warmUpRun(m: Machine, argv: string[], pausedMs: () => number, anyExit = false): Promise<void> {
  const runId = `run_standby${randomBytes(6).toString('hex')}`;
  let onMessage: (msg: Record<string, unknown>) => void = () => undefined;
  const ended = new Promise<RunEndEvent>((resolve) => {
    onMessage = (msg) => {
      if (msg.event === 'run_end' && msg.run_id === runId) resolve(msg as unknown as RunEndEvent);
    };
    m.agent.on('message', onMessage);
  });
  try {
    await agentRequest(m.agent, 'run_start', { run_id: runId, argv, timeout_ms: 30_000, max_output_bytes: 4096 }, 30_000);
    const deadline = guestDeadline(pausedMs, 'the warm-up run');
    const { end, last_seq } = await Promise.race([ended, deadline.failed]).finally(deadline.done);
    await agentRequest(m.agent, 'run_ack', { run_id: runId, seq: last_seq, done: true }, 30_000);
    if (end.exit_code !== 0 && !(anyExit && end.exit_code !== null)) throw new Error(`the warm-up run ${argv[0]} ended with ${end.exit_code ?? end.signal}`);
  } finally {
    m.agent.off('message', onMessage);
  }
}
