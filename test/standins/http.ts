import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

export type Provider = 'anthropic' | 'openai' | 'google';

/** One request a provider stand-in received, as the test later inspects it. */
export interface SeenRequest {
  provider: Provider;
  method: string;
  /** The path without the query string. */
  path: string;
  query: Record<string, string>;
  /** The API key or token presented, whichever way the client presented it. */
  credential?: string;
  credentialFrom?: 'x-api-key' | 'authorization' | 'x-goog-api-key' | 'query-key';
  headers: Record<string, string>;
  /** The parsed JSON body; undefined when there was none or it was not JSON. */
  body?: unknown;
  /** The status the stand-in answered with, once it has answered. */
  status?: number;
}

/** A request being answered: what was seen, and the response to write. */
export interface Exchange {
  seen: SeenRequest;
  res: ServerResponse;
}

/** One provider's API: how it answers, and how it refuses a credential it does not know. */
export interface ProviderApi {
  provider: Provider;
  answer(ex: Exchange): void | Promise<void>;
  unauthorized(ex: Exchange): void;
  /** Paths a client calls without credentials (connectivity probes). */
  open?: (path: string) => boolean;
}

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves one provider on 127.0.0.1 and an ephemeral port, recording every request in `seen`.
 * With `key` set, a request presenting any other credential gets the provider's own 401.
 */
export async function serveProvider(api: ProviderApi, seen: SeenRequest[], key?: string): Promise<RunningServer> {
  const server = createServer((req, res) => {
    void handle(api, seen, key, req, res);
  });
  return listen(server);
}

async function handle(api: ProviderApi, seen: SeenRequest[], key: string | undefined, req: IncomingMessage, res: ServerResponse) {
  const url = new URL(req.url ?? '/', 'http://standin');
  const raw = await readBody(req);
  const record: SeenRequest = {
    provider: api.provider,
    method: req.method ?? 'GET',
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    ...credentialOf(req, url),
    headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')])),
    body: parseBody(raw, req.headers['content-encoding']),
  };
  seen.push(record);
  res.on('finish', () => {
    record.status = res.statusCode;
  });
  const ex = { seen: record, res };
  try {
    if (key !== undefined && record.credential !== key && !api.open?.(record.path)) api.unauthorized(ex);
    else await api.answer(ex);
  } catch (err) {
    if (!res.headersSent) sendJson(res, 500, { error: { message: `stand-in failed: ${(err as Error).message}` } });
    else res.end();
  }
}

function credentialOf(req: IncomingMessage, url: URL): Pick<SeenRequest, 'credential' | 'credentialFrom'> {
  const h = req.headers;
  if (typeof h['x-api-key'] === 'string') return { credential: h['x-api-key'], credentialFrom: 'x-api-key' };
  if (typeof h.authorization === 'string') {
    return { credential: h.authorization.replace(/^Bearer\s+/i, ''), credentialFrom: 'authorization' };
  }
  if (typeof h['x-goog-api-key'] === 'string') return { credential: h['x-goog-api-key'], credentialFrom: 'x-goog-api-key' };
  const key = url.searchParams.get('key');
  if (key !== null) return { credential: key, credentialFrom: 'query-key' };
  return {};
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function parseBody(raw: Buffer, encoding: string | undefined): unknown {
  if (raw.length === 0) return undefined;
  try {
    const plain =
      encoding === 'gzip' ? gunzipSync(raw) : encoding === 'deflate' ? inflateSync(raw) : encoding === 'br' ? brotliDecompressSync(raw) : raw;
    return JSON.parse(plain.toString('utf8'));
  } catch {
    return undefined;
  }
}

export async function listen(server: Server): Promise<RunningServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A server-sent event stream: `event:` lines when named, `data:` lines always. */
export class EventStream {
  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  }

  send(data: unknown, event?: string): void {
    const payload = typeof data === 'string' ? data : JSON.stringify(data);
    this.res.write(`${event ? `event: ${event}\n` : ''}data: ${payload}\n\n`);
  }

  end(): void {
    this.res.end();
  }
}

/** Splits a string into about `parts` pieces, so that deltas really arrive in more than one event. */
export function pieces(s: string, parts = 3): string[] {
  const size = Math.max(1, Math.ceil(s.length / parts));
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out.length > 0 ? out : [''];
}

/** A rough token count: providers' tokenizers average about four characters a token. */
export function estimateTokens(value: unknown): number {
  return Math.max(1, Math.ceil(JSON.stringify(value ?? '').length / 4));
}

/** The loose reading of a JSON request body: an object's fields, or nothing. */
export function fields(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
