/**
 * E2B's `process.Process` service over Connect, for one sandbox at a time (the request's, see
 * sandboxPlane.ts): processes start on the guest agent's terminal (guestProcess.ts), are known here by
 * their guest pid (and tag), and can be listed, fed, signalled and followed by any request of the
 * sandbox's while they live. What a process printed before a follower came is not replayed (as E2B).
 */
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Process, type ProcessEventSchema, type ProcessSelector, Signal } from './gen/process_pb.ts';
import { GuestProcess, type ProcessExit, type ProcessSpec } from './guestProcess.ts';
import { sandboxOf, type SandboxContext } from './context.ts';
import { collect } from './guestFs.ts';

type Event = MessageInitShape<typeof ProcessEventSchema>;

interface Entry {
  proc: GuestProcess;
  tag: string | null;
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
}

/** Live processes per VM, by pid. */
const live = new Map<string, Map<number, Entry>>();

function table(vmId: string): Map<number, Entry> {
  let t = live.get(vmId);
  if (!t) live.set(vmId, (t = new Map()));
  return t;
}

/** What the guest keeps with a process for a host that comes after (a pause, a restart). */
interface Meta {
  tag: string | null;
  config: Entry['config'];
  root: boolean;
}

const metaOf = (e: Pick<Entry, 'tag' | 'config'>, root: boolean) => JSON.stringify({ tag: e.tag, config: e.config, root } satisfies Meta);

function parseMeta(meta: string): Meta | null {
  try {
    const m = JSON.parse(meta) as Meta;
    return m && typeof m === 'object' && m.config && typeof m.config.cmd === 'string' ? m : null;
  } catch {
    return null;
  }
}

/**
 * The process a selector names: one this server follows, else (its stream went with a pause or a
 * restart of the server, or it was never followed here) one the guest still runs, followed again.
 */
async function find(sb: SandboxContext, sel: ProcessSelector | undefined): Promise<Entry> {
  const t = table(sb.vmId);
  const s = sel?.selector;
  if (s?.case !== 'pid' && s?.case !== 'tag') throw new ConnectError('process: give a pid or a tag', Code.InvalidArgument);
  const matches = (pid: number, tag: string | null) => (s.case === 'pid' ? pid === s.value : tag === s.value);
  for (const [pid, e] of t) if (matches(pid, e.tag) && !e.proc.lost) return e;
  for (const g of (await sb.listProcesses()) ?? []) {
    const m = parseMeta(g.meta);
    if (!m || !matches(g.pid, m.tag)) continue;
    const proc = await held(sb, () => GuestProcess.attach(sb, g.pid, { argv: [m.config.cmd, ...m.config.args], env: m.config.envs, cwd: m.config.cwd ?? null, root: m.root, stdin: true, pty: null, meta: g.meta }));
    if (!proc) break;
    const e: Entry = { proc, tag: m.tag, config: m.config };
    t.set(g.pid, e);
    forgetAtEnd(t, proc);
    return e;
  }
  throw new ConnectError(s.case === 'pid' ? `process with pid ${s.value} not found` : `process with tag ${s.value} not found`, Code.NotFound);
}

/**
 * A process followed here, holding a place in the tenant's run_streams from before it opens until it
 * ends (or its stream goes with a pause): the place is given back when it does not open.
 */
async function held<P extends GuestProcess | null>(sb: SandboxContext, open: () => Promise<P>): Promise<P> {
  const lease = await sb.holdStream();
  let proc: P;
  try {
    proc = await open();
  } catch (err) {
    await lease.end();
    throw err;
  }
  if (!proc || proc.ended) void lease.end();
  else {
    proc.once('end', () => void lease.end());
    // Its lease ran out with the tenant's places taken meanwhile: its stream goes, as a shell's does.
    void lease.lapsed?.then(() => proc.close());
  }
  return proc;
}

/** An ended process is kept a moment, so a Connect right after its end still finds it. */
function forgetAtEnd(t: Map<number, Entry>, proc: GuestProcess): void {
  proc.once('end', () => setTimeout(() => t.get(proc.pid)?.proc === proc && t.delete(proc.pid), 5_000).unref());
}

const endEvent = (x: ProcessExit): Event => ({
  event: {
    case: 'end',
    value: {
      exitCode: x.exitCode,
      exited: x.signal === null && x.error === null,
      status: x.error ? 'error' : x.signal ? `signal: ${x.signal.replace(/^SIG/, '').toLowerCase()}` : `exit status ${x.exitCode}`,
      ...(x.error ? { error: x.error } : {}),
    },
  },
});

/**
 * The process's events from now on, as a stream; ends with its end, or when the caller goes. A
 * process lost with its sandbox (killed, paused, stopped: its stream went, not its program) ends the
 * connection instead (`drop`), as E2B's proxy does, so the SDK asks the sandbox's health and says why.
 */
async function* follow(proc: GuestProcess, signal: AbortSignal, withStart: boolean, withBacklog = false, drop?: () => void): AsyncGenerator<{ event: Event }> {
  const data = (kind: 'stdout' | 'stderr' | 'pty', b: Buffer): Event => ({ event: { case: 'data', value: { output: { case: kind, value: new Uint8Array(b) } } } });
  // What came before this follower (the start's own output), then what comes: taken in one tick, so nothing falls between.
  const queue: Event[] = withBacklog ? proc.takeBacklog().map((b) => data(b.kind, b.data)) : [];
  let lost = false;
  const ended = (x: ProcessExit) => {
    if (proc.lost && drop) lost = true;
    else queue.push(endEvent(x));
  };
  if (proc.ended) ended(proc.ended);
  let wake: (() => void) | null = null;
  const push = (e: Event) => (queue.push(e), wake?.());
  const onData = (kind: 'stdout' | 'stderr' | 'pty') => (b: Buffer) => push(data(kind, b));
  const handlers = { stdout: onData('stdout'), stderr: onData('stderr'), pty: onData('pty') };
  const onEnd = (x: ProcessExit) => (ended(x), wake?.());
  for (const [k, fn] of Object.entries(handlers)) proc.on(k, fn);
  proc.on('end', onEnd);
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  // A keepalive now and then: proxies and the client's idle timers see a live stream.
  const ping = setInterval(() => push({ event: { case: 'keepalive', value: {} } }), 30_000);
  try {
    if (withStart) yield { event: { event: { case: 'start', value: { pid: proc.pid } } } };
    for (;;) {
      while (!queue.length && !signal.aborted && !lost) await new Promise<void>((r) => (wake = r));
      wake = null;
      if (signal.aborted) return;
      if (lost && !queue.length) return drop!();
      for (const e of queue.splice(0)) {
        yield { event: e };
        if (e.event?.case === 'end') return;
      }
    }
  } finally {
    clearInterval(ping);
    signal.removeEventListener('abort', onAbort);
    for (const [k, fn] of Object.entries(handlers)) proc.off(k, fn);
    proc.off('end', onEnd);
  }
}

function bytesOf(input: { input: { case: string | undefined; value?: Uint8Array } } | undefined): Buffer {
  const v = input?.input.value;
  if (!v) throw new ConnectError('input: give stdin or pty bytes', Code.InvalidArgument);
  return Buffer.from(v);
}

export function processService(): ServiceImpl<typeof Process> {
  return {
    async *start(req, ctx: HandlerContext) {
      const sb: SandboxContext = sandboxOf(ctx);
      const p = req.process;
      if (!p || !p.cmd) throw new ConnectError('process.cmd: give the command', Code.InvalidArgument);
      const config = { cmd: p.cmd, args: p.args, envs: p.envs, ...(p.cwd ? { cwd: p.cwd } : {}) };
      const spec: ProcessSpec = {
        argv: [p.cmd, ...p.args],
        env: { ...sb.envVars, ...p.envs },
        // As envd: a process without a cwd starts in its user's home (root's /root; the guest's is /home/user).
        cwd: p.cwd ?? (sb.user === 'root' ? '/root' : null),
        root: sb.user === 'root',
        stdin: req.stdin ?? true,
        pty: req.pty ? { cols: req.pty.size?.cols || 80, rows: req.pty.size?.rows || 24 } : null,
        meta: metaOf({ tag: req.tag ?? null, config }, sb.user === 'root'),
      };
      const proc = await held(sb, () => GuestProcess.open(sb, spec));
      try {
        await proc.start();
      } catch (err) {
        proc.close();
        throw new ConnectError(`the process did not start: ${(err as Error).message}`, Code.Unavailable);
      }
      const t = table(sb.vmId);
      t.set(proc.pid, { proc, tag: req.tag ?? null, config });
      forgetAtEnd(t, proc);
      yield* follow(proc, ctx.signal, true, true, sb.drop);
    },

    async *connect(req, ctx) {
      const sb = sandboxOf(ctx);
      const e = await find(sb, req.process);
      yield* follow(e.proc, ctx.signal, true, false, sb.drop);
    },

    async list(_req, ctx) {
      const sb = sandboxOf(ctx);
      const listed = (pid: number, e: Pick<Entry, 'tag' | 'config'>) => ({ pid, config: e.config, ...(e.tag !== null ? { tag: e.tag } : {}) });
      const followed = [...(live.get(sb.vmId)?.entries() ?? [])].filter(([, e]) => !e.proc.ended);
      const guest = await sb.listProcesses();
      if (!guest) return { processes: followed.map(([pid, e]) => listed(pid, e)) };
      // The guest's word: what it still runs (a pause or a server's restart lost this server's streams, not the processes).
      const processes = followed.filter(([, e]) => e.proc.spec.pty).map(([pid, e]) => listed(pid, e));
      for (const g of guest) {
        const e = followed.find(([pid]) => pid === g.pid)?.[1] ?? parseMeta(g.meta);
        if (e) processes.push(listed(g.pid, e));
      }
      return { processes };
    },

    async sendInput(req, ctx) {
      const e = await find(sandboxOf(ctx), req.process);
      await e.proc.sendStdin(bytesOf(req.input));
      return {};
    },

    async streamInput(reqs, ctx) {
      const sb = sandboxOf(ctx);
      let e: Entry | null = null;
      for await (const r of reqs) {
        if (r.event.case === 'start') e = await find(sb, r.event.value.process);
        else if (r.event.case === 'data') {
          if (!e) throw new ConnectError('start: name the process first', Code.InvalidArgument);
          await e.proc.sendStdin(bytesOf(r.event.value.input));
        }
      }
      return {};
    },

    async sendSignal(req, ctx) {
      const sb = sandboxOf(ctx);
      const e = await find(sb, req.process);
      if (req.signal !== Signal.SIGKILL && req.signal !== Signal.SIGTERM) throw new ConnectError('signal: SIGTERM or SIGKILL', Code.InvalidArgument);
      // A PTY's program is signalled before its terminal is hung up, so it is gone when the answer comes
      // (the hangup alone reaches the guest a moment later; E2B's callers look right after a kill).
      if (e.proc.spec.pty && e.proc.pid > 0 && !e.proc.ended) {
        await collect({ ...sb, user: 'root' }, ['kill', req.signal === Signal.SIGKILL ? '-KILL' : '-TERM', '--', String(e.proc.pid)]).catch(() => undefined);
      }
      await e.proc.signal(req.signal === Signal.SIGKILL ? 9 : 15);
      return {};
    },

    async closeStdin(req, ctx) {
      const e = await find(sandboxOf(ctx), req.process);
      if (e.proc.spec.pty) throw new ConnectError('a PTY has no stdin to close: send Ctrl-D (0x04)', Code.FailedPrecondition);
      await e.proc.closeStdin();
      return {};
    },

    async update(req, ctx) {
      const e = await find(sandboxOf(ctx), req.process);
      if (req.pty?.size) e.proc.resize(req.pty.size.cols, req.pty.size.rows);
      return {};
    },
  };
}

/** Ends every process of a VM this server follows (the sandbox was killed). */
export function forgetProcesses(vmId: string): void {
  for (const e of live.get(vmId)?.values() ?? []) e.proc.close();
  live.delete(vmId);
}
