import net from 'node:net';
import { EventEmitter } from 'node:events';

/** How a protocol tells an answer (to request `id`) from any other message. */
type AnswerOf = (msg: Record<string, unknown>) => { id: number; ok: boolean; value: unknown; error?: string } | null;

/**
 * A newline-delimited JSON connection on a UNIX socket, with request ids and per-request timeouts.
 * QMP and the guest agent both speak JSON lines; they differ only in how an answer names its request.
 */
export class JsonLineChannel extends EventEmitter {
  private buffered = '';
  private parts: string[] = [];
  private closed = false;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private nextId = 1;

  private constructor(
    private readonly socket: net.Socket,
    private readonly answerOf: AnswerOf,
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
  ): Promise<JsonLineChannel> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => (socket.destroy(), reject(new Error(`connect ${socketPath}: timed out`))), timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new JsonLineChannel(socket, answerOf));
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
    // A large answer (a run's output) arrives in many chunks: look for the end of line in the new
    // chunk only, and join the parts once.
    if (!chunk.includes('\n')) {
      this.parts.push(chunk);
      return;
    }
    this.parts.push(chunk);
    this.buffered = this.parts.join('');
    this.parts = [];
    let nl: number;
    while ((nl = this.buffered.indexOf('\n')) >= 0) {
      const line = this.buffered.slice(0, nl).trim();
      this.buffered = this.buffered.slice(nl + 1);
      if (!line) continue;
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
    if (this.buffered) this.parts.push(this.buffered);
    this.buffered = '';
  }

  private onClose(): void {
    this.closed = true;
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

/** QMP: `{"execute", "id"}` answered by `{"return", "id"}` or `{"error": {"desc"}, "id"}`. */
export async function connectQmp(socketPath: string): Promise<JsonLineChannel> {
  const ch = await JsonLineChannel.connect(socketPath, (msg) =>
    typeof msg.id === 'number' && ('return' in msg || 'error' in msg)
      ? { id: msg.id, ok: 'return' in msg, value: msg.return, error: (msg.error as { desc?: string } | undefined)?.desc }
      : null,
  );
  await ch.request((id) => ({ execute: 'qmp_capabilities', id }), 5000);
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
