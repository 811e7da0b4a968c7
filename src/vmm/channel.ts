import net from 'node:net';
import { EventEmitter } from 'node:events';

/** How a protocol tells an answer (to request `id`) from any other message. */
type AnswerOf = (msg: Record<string, unknown>) => { id: number; ok: boolean; value: unknown; error?: string } | null;

/**
 * The longest line a peer may send, in characters (UTF-8 text, so at most that many bytes). The
 * guest's largest honest answers are a run's unacknowledged output after a host restart (`run_sync`:
 * 4 MiB a stream, JSON-escaped) and a directory listing (10,000 entries): a few MiB. A longer line is
 * dropped as it comes, never held: a guest cannot grow the host's memory by not ending a line.
 */
export const MAX_LINE = 32 * 1024 * 1024;
/** What of a dropped line is kept, to tell which request it answered. */
const DROPPED_HEAD = 64;

/** A line over the cap, as the channel reports it (event `overflow`). */
export interface LineOverflow {
  /** Characters of the line dropped, up to its end (or up to the close of the channel). */
  chars: number;
  /** The request it answered, when its start says (`{"id":N,…`). */
  id: number | null;
}

/**
 * A newline-delimited JSON connection on a UNIX socket, with request ids and per-request timeouts.
 * QMP and the guest agent both speak JSON lines; they differ only in how an answer names its request.
 * A line over `maxLine` is dropped (event `overflow`); the request it answered fails at once.
 */
export class JsonLineChannel extends EventEmitter {
  private buffered = '';
  private parts: string[] = [];
  /** Characters in `parts`. */
  private held = 0;
  /** A line over the cap being dropped: its head and how much of it went. */
  private dropping: { head: string; chars: number } | null = null;
  private closed = false;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private nextId = 1;

  private constructor(
    private readonly socket: net.Socket,
    private readonly answerOf: AnswerOf,
    private readonly maxLine: number,
  ) {
    super();
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => this.onClose());
  }

  static connect(
    socketPath: string,
    answerOf: AnswerOf,
    timeoutMs = 2000,
    maxLine = MAX_LINE,
  ): Promise<JsonLineChannel> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => (socket.destroy(), reject(new Error(`connect ${socketPath}: timed out`))), timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new JsonLineChannel(socket, answerOf, maxLine));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private onData(chunk: string): void {
    if (this.dropping) {
      const nl = chunk.indexOf('\n');
      if (nl < 0) {
        this.dropping.chars += chunk.length;
        return;
      }
      this.dropping.chars += nl;
      this.dropped();
      chunk = chunk.slice(nl + 1);
      if (!chunk) return;
    }
    // A large answer (a run's output) arrives in many chunks: look for the end of line in the new
    // chunk only, and join the parts once.
    if (!chunk.includes('\n')) {
      if (this.held + chunk.length > this.maxLine) {
        let head = '';
        for (const p of [...this.parts, chunk]) if ((head += p.slice(0, DROPPED_HEAD - head.length)).length >= DROPPED_HEAD) break;
        this.dropping = { head, chars: this.held + chunk.length };
        this.parts = [];
        this.held = 0;
        return;
      }
      this.parts.push(chunk);
      this.held += chunk.length;
      return;
    }
    this.parts.push(chunk);
    this.buffered = this.parts.join('');
    this.parts = [];
    this.held = 0;
    let nl: number;
    while ((nl = this.buffered.indexOf('\n')) >= 0) {
      const line = this.buffered.slice(0, nl).trim();
      this.buffered = this.buffered.slice(nl + 1);
      if (!line) continue;
      if (nl > this.maxLine) {
        this.dropping = { head: line.slice(0, DROPPED_HEAD), chars: nl };
        this.dropped();
        continue;
      }
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const answer = this.answerOf(msg);
      const waiter = answer ? this.pending.get(answer.id) : undefined;
      if (answer && waiter) {
        this.pending.delete(answer.id);
        clearTimeout(waiter.timer);
        if (answer.ok) waiter.resolve(answer.value);
        else waiter.reject(new Error(answer.error ?? 'request failed'));
      } else {
        this.emit('message', msg);
      }
    }
    if (this.buffered.length > this.maxLine) {
      this.dropping = { head: this.buffered.slice(0, DROPPED_HEAD), chars: this.buffered.length };
    } else if (this.buffered) {
      this.parts.push(this.buffered);
      this.held = this.buffered.length;
    }
    this.buffered = '';
  }

  /** The line over the cap has ended (or the channel has): the request it answered fails now. */
  private dropped(): void {
    const d = this.dropping!;
    this.dropping = null;
    const id = Number(/^\{"id":(\d+)[,}]/.exec(d.head)?.[1] ?? NaN);
    const waiter = Number.isInteger(id) ? this.pending.get(id) : undefined;
    if (waiter) {
      this.pending.delete(id);
      clearTimeout(waiter.timer);
      waiter.reject(new Error(`the answer was longer than ${this.maxLine} characters and was dropped`));
    }
    this.emit('overflow', { chars: d.chars, id: Number.isInteger(id) ? id : null } satisfies LineOverflow);
  }

  private onClose(): void {
    this.closed = true;
    if (this.dropping) this.dropped();
    for (const [, w] of this.pending) {
      clearTimeout(w.timer);
      w.reject(new Error('the channel closed'));
    }
    this.pending.clear();
    this.emit('close');
  }

  /** Sends `make(id)` and waits for the answer with that id. */
  request<T>(make: (id: number) => object, timeoutMs: number): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the channel is closed'));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      this.socket.write(`${JSON.stringify(make(id))}\n`);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * QMP: `{"execute", "id"}` answered by `{"return", "id"}` or `{"error": {"desc"}, "id"}`. A QMP
 * socket serves one client at a time and keeps the others waiting, so a connection that got no
 * answer in time is closed here: left open, it would hold the monitor and every later try would wait
 * behind it for good (a busy host's QEMU slow to answer once was then never reached again).
 */
export async function connectQmp(socketPath: string, timeoutMs = 5000): Promise<JsonLineChannel> {
  const ch = await JsonLineChannel.connect(socketPath, (msg) =>
    typeof msg.id === 'number' && ('return' in msg || 'error' in msg)
      ? { id: msg.id, ok: 'return' in msg, value: msg.return, error: (msg.error as { desc?: string } | undefined)?.desc }
      : null,
  );
  try {
    await ch.request((id) => ({ execute: 'qmp_capabilities', id }), timeoutMs);
  } catch (err) {
    ch.close();
    throw err;
  }
  return ch;
}

export function qmp<T = unknown>(ch: JsonLineChannel, command: string, args?: object, timeoutMs = 5000): Promise<T> {
  return ch.request<T>((id) => ({ execute: command, arguments: args, id }), timeoutMs);
}

/** The guest agent: `{"id","op","args"}` answered by `{"id","ok","result"|"error"}`. */
export function connectAgent(socketPath: string): Promise<JsonLineChannel> {
  return JsonLineChannel.connect(socketPath, (msg) =>
    typeof msg.id === 'number' && typeof msg.ok === 'boolean'
      ? { id: msg.id, ok: msg.ok, value: msg.result, error: typeof msg.error === 'string' ? msg.error : undefined }
      : null,
  );
}

export function agentRequest<T>(ch: JsonLineChannel, op: string, args: unknown, timeoutMs: number): Promise<T> {
  return ch.request<T>((id) => ({ id, op, args }), timeoutMs);
}
