/**
 * An API replica's way to the shells and files of VMs on other machines: each goes to the host the
 * VM's row names, through its internal endpoint (internalContract.ts). File bytes stream through in
 * both directions, never whole here; a shell is a WebSocket to the host, joined to the customer's.
 */
import { WebSocket, type RawData } from 'ws';
import type { Db } from '../store/db.ts';
import type { Logger } from '../log.ts';
import { DomainError, type ErrorCode } from '../domain/errors.ts';
import { ERROR_STATUS } from '../http/errors.ts';
import type { GuestAccess, GuestRead, GuestShell, ShellEnd, ShellOptions, WriteOptions } from '../domain/guestAccess.ts';
import {
  DirAnswerSchema,
  INTERNAL_FILES_PATH,
  INTERNAL_SHELL_PATH,
  InternalErrorSchema,
  SHELL_INTERNAL_CLOSE,
  SHELL_SPEC_HEADER,
  WrittenSchema,
} from '../host/internalContract.ts';
import * as endpoints from '../store/internalCredentials.ts';
import { HostUnreachable, type HostTarget, type InternalClient } from './internalClient.ts';

/** The host's answers a customer should see as they are. */
const PASSED_ON = new Set<ErrorCode>(['vm_not_running', 'not_found', 'invalid_request', 'payload_too_large', 'rate_limited', 'unavailable']);
const OPEN_TIMEOUT_MS = 30_000;

export const hostLost = () => new DomainError('vm_not_running', "the VM's host cannot be reached", 'try again in a minute');

export async function hostError(res: Response): Promise<Error> {
  const json: unknown = await res.json().catch(() => ({}));
  const err = InternalErrorSchema.safeParse(json);
  const code = err.success ? (err.data.error as ErrorCode) : undefined;
  if (code && PASSED_ON.has(code) && ERROR_STATUS[code] === res.status) {
    const retry = res.headers.get('retry-after');
    return new DomainError(code, err.data!.message, err.data!.hint, retry ? { 'Retry-After': retry } : undefined);
  }
  return new Error(`the VM's host answered ${res.status}: ${err.success ? err.data.message : ''}`);
}

/** A shell on the VM's host, through a WebSocket. */
class RemoteShell implements GuestShell {
  readonly ended: Promise<ShellEnd>;
  private sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  private early: Buffer[] = [];

  constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: RawData, isBinary) => {
      if (!isBinary) return;
      const chunk = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      if (this.sink) this.deliver(chunk);
      else this.early.push(chunk);
    });
    ws.on('error', () => undefined);
    this.ended = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        let said: Record<string, unknown> = {};
        try {
          said = JSON.parse(reason.toString('utf8')) as Record<string, unknown>;
        } catch {
          // no reason: the host went away
        }
        if (code === SHELL_INTERNAL_CLOSE.exited) {
          resolve({ kind: 'exit', exit_code: (said.exit_code as number | null) ?? null, signal: (said.signal as string | null) ?? null });
        } else {
          resolve({
            kind: 'cut',
            error: typeof said.error === 'string' ? said.error : 'vm_not_running',
            message: typeof said.message === 'string' ? said.message : "the VM's host went away",
          });
        }
      });
    });
  }

  private deliver(chunk: Buffer): void {
    // The host's socket is read on as the customer's takes the bytes.
    this.ws.pause();
    this.sink!(chunk, () => this.ws.resume());
  }

  write(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.ws.readyState !== WebSocket.OPEN) return reject(new Error('the shell is closed'));
      this.ws.send(bytes, { binary: true }, (err) => (err ? reject(err) : resolve()));
    });
  }

  resize(cols: number, rows: number): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  output(fn: (chunk: Buffer, done: () => void) => void): void {
    this.sink = fn;
    for (const chunk of this.early.splice(0)) this.deliver(chunk);
  }

  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000, 'closed');
  }
}

export class RemoteGuest implements GuestAccess {
  constructor(
    private readonly db: Db,
    private readonly client: InternalClient,
    private readonly log: Logger,
  ) {}

  private async host(vmId: string): Promise<HostTarget> {
    const row = await endpoints.endpointOfVm(this.db, vmId);
    if (!row?.internal_url) throw hostLost();
    return { url: row.internal_url, credentialHash: row.credential_hash };
  }

  private path(route: string, vmId: string, query: Record<string, string>): string {
    return `${route.replace(':id', encodeURIComponent(vmId))}?${new URLSearchParams(query)}`;
  }

  /** A request to the VM's host; one that cannot reach it, or not the host meant, is the customer's vm_not_running. */
  private async send(vmId: string, host: HostTarget, path: string, init: Parameters<InternalClient['request']>[2]): Promise<Response> {
    try {
      return await this.client.request(host, path, init);
    } catch (err) {
      if (err instanceof HostUnreachable) {
        this.log.warn({ err, vm_id: vmId }, "reaching the VM's host failed");
        throw hostLost();
      }
      throw err;
    }
  }

  async openShell(vmId: string, opts: ShellOptions): Promise<GuestShell> {
    let target;
    try {
      target = this.client.socket(await this.host(vmId), this.path(INTERNAL_SHELL_PATH, vmId, {}), {
        [SHELL_SPEC_HEADER]: Buffer.from(JSON.stringify(opts)).toString('base64url'),
      });
    } catch (err) {
      if (err instanceof HostUnreachable) throw hostLost();
      throw err;
    }
    const ws = new WebSocket(target.url, { ...target.options, perMessageDeflate: false, handshakeTimeout: OPEN_TIMEOUT_MS });
    const shell = new RemoteShell(ws);
    await new Promise<void>((resolve, reject) => {
      // The handshake's answer must come from the VM's host: it carries the host's credential.
      ws.once('upgrade', (res) => {
        try {
          target.vouch(res.headers);
        } catch (err) {
          this.log.warn({ err, vm_id: vmId }, "the VM's host could not be vouched for");
          ws.terminate();
          reject(hostLost());
        }
      });
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => {
        if (res.statusCode !== 401 && res.statusCode !== 429) {
          try {
            target.vouch(res.headers);
          } catch {
            res.resume();
            return reject(hostLost());
          }
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const answer = new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500, headers: { 'content-type': 'application/json' } });
          void hostError(answer).then(reject);
        });
      });
      ws.once('error', (err) => {
        this.log.warn({ err, vm_id: vmId }, "reaching the VM's host for a shell failed");
        reject(hostLost());
      });
    });
    return shell;
  }

  async readFile(vmId: string, path: string): Promise<GuestRead> {
    const host = await this.host(vmId);
    const res = await this.send(vmId, host, this.path(INTERNAL_FILES_PATH, vmId, { path }), { method: 'GET' });
    if (!res.ok) throw await hostError(res);
    if ((res.headers.get('content-type') ?? '').startsWith('application/json')) {
      const dir = DirAnswerSchema.parse(await res.json());
      return { kind: 'dir', path: dir.path, entries: dir.entries };
    }
    const size = Number(res.headers.get('content-length'));
    return { kind: 'file', path: decodeURI(res.headers.get('x-agentvm-path') ?? path), size, body: res.body! };
  }

  async writeFile(vmId: string, path: string, body: AsyncIterable<Uint8Array>, opts: WriteOptions): Promise<{ path: string; size: number }> {
    const host = await this.host(vmId);
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    if (opts.expectedBytes !== undefined) headers['content-length'] = String(opts.expectedBytes);
    // The customer's body as it comes; a cut one cuts the call to the host, which leaves nothing there.
    const it = body[Symbol.asyncIterator]();
    const stream = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            const { done, value } = await it.next();
            if (done) controller.close();
            else controller.enqueue(value);
          } catch (err) {
            controller.error(err);
          }
        },
        async cancel(reason) {
          await it.return?.(reason);
        },
      },
      { highWaterMark: 0 },
    );
    const res = await this.send(vmId, host, this.path(INTERNAL_FILES_PATH, vmId, { path, max_bytes: String(opts.maxBytes) }), {
      method: 'PUT',
      headers,
      body: stream,
    });
    if (!res.ok) throw await hostError(res);
    return WrittenSchema.parse(await res.json());
  }
}
