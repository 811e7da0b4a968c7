/**
 * How an API replica speaks to VM hosts' internal endpoints: with its own credential (issued when it
 * registered), over TLS when the operator gave certificates (AGENTVM_INTERNAL_TLS_*: the CA the hosts'
 * certificates are checked against, and this replica's certificate for hosts that ask for one), and
 * believing an answer only when it carries the live credential of the host the VM's row names.
 */
import http from 'node:http';
import https from 'node:https';
import { Readable, type Duplex } from 'node:stream';
import type { IncomingHttpHeaders } from 'node:http';
import type { ClientOptions } from 'ws';
import { randomBase62, sha256Hex } from '../domain/ids.ts';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HOST_CREDENTIAL_HEADER } from '../host/internalContract.ts';

/** The certificates of the internal endpoint (PEM). */
export interface InternalTls {
  cert: Buffer;
  key: Buffer;
  /** The CA that signs every host's and replica's certificate; without it, the system's CAs. */
  ca?: Buffer;
}

/** A host that cannot be reached, or that could not show it is the host the VM's row names. */
export class HostUnreachable extends Error {}

/** A host as a replica finds it from the VM's row: where it serves, and its live credential's hash (null: none). */
export interface HostTarget {
  url: string;
  credentialHash: string | null;
}

export class InternalClient {
  private readonly agent: http.Agent;

  constructor(
    private readonly credential: string,
    private readonly tls: InternalTls | null = null,
  ) {
    this.agent = tls ? new https.Agent({ keepAlive: true, cert: tls.cert, key: tls.key, ca: tls.ca }) : new http.Agent({ keepAlive: true });
  }

  /** The URL of a route on the host, refused when TLS is on and the host does not serve it (no silent downgrade). */
  private target(host: HostTarget, path: string): URL {
    const url = new URL(path, host.url);
    if (this.tls && url.protocol !== 'https:' && url.protocol !== 'wss:') {
      throw new HostUnreachable(`the internal endpoint is TLS-only here, and the VM's host serves ${url.protocol}`);
    }
    if (!this.tls && url.protocol !== 'http:' && url.protocol !== 'ws:') throw new HostUnreachable(`the VM's host serves ${url.protocol}, and this replica has no internal TLS certificates`);
    if (!host.credentialHash) throw new HostUnreachable("the VM's host has no live credential (revoked, or not registered)");
    return url;
  }

  /** Whether an answer comes from the host meant: it carries that host's live credential. */
  private vouch(host: HostTarget, headers: IncomingHttpHeaders): void {
    const said = headers[HOST_CREDENTIAL_HEADER];
    if (typeof said !== 'string' || sha256Hex(said) !== host.credentialHash) {
      throw new HostUnreachable("the answer did not come from the VM's host (its credential was missing or wrong)");
    }
  }

  /**
   * One request to a host's route: the body a string or a stream of bytes, the answer a Fetch Response
   * whose body streams as it comes. Fails with HostUnreachable when the host cannot be reached or is not
   * the host meant.
   */
  request(
    host: HostTarget,
    path: string,
    init: { method: string; headers?: Record<string, string>; body?: string | ReadableStream<Uint8Array>; signal?: AbortSignal },
  ): Promise<Response> {
    const url = this.target(host, path);
    return new Promise<Response>((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).request(url, {
        method: init.method,
        headers: { ...init.headers, authorization: `Bearer ${this.credential}` },
        agent: this.agent,
        signal: init.signal,
      });
      req.on('error', (err) => reject(init.signal?.aborted ? init.signal.reason : new HostUnreachable(`the VM's host cannot be reached: ${err.message}`)));
      req.on('response', (res) => {
        try {
          resolve(this.answer(host, res, init.method));
        } catch (err) {
          reject(err);
        }
      });
      if (typeof init.body === 'string' || init.body === undefined) {
        req.end(init.body);
      } else {
        const source = Readable.fromWeb(init.body as import('node:stream/web').ReadableStream<Uint8Array>);
        source.on('error', (err) => req.destroy(err));
        source.pipe(req);
      }
    });
  }

  /** A host's answer as a Fetch Response whose body streams; throws HostUnreachable when it is not the host meant. */
  private answer(host: HostTarget, res: http.IncomingMessage, method: string): Response {
    try {
      // A refusal before authentication (401, 429) carries nothing to believe, and no credential.
      if (res.statusCode !== 401 && res.statusCode !== 429) this.vouch(host, res.headers);
    } catch (err) {
      res.resume();
      throw err;
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const status = res.statusCode ?? 502;
    const empty = status === 204 || status === 304 || method === 'HEAD';
    if (empty) res.resume();
    return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, headers });
  }

  /**
   * An HTTP upgrade to a host's route (a connection to a port of a guest): the connection once the host
   * has answered 101 with its credential, else the host's answer (a refusal) as a Response.
   */
  upgrade(host: HostTarget, path: string, protocol: string): Promise<{ socket: Duplex } | { answer: Response }> {
    const url = this.target(host, path);
    return new Promise((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).request(url, {
        method: 'GET',
        headers: { connection: 'Upgrade', upgrade: protocol, authorization: `Bearer ${this.credential}` },
        agent: this.agent,
      });
      req.on('error', (err) => reject(new HostUnreachable(`the VM's host cannot be reached: ${err.message}`)));
      req.on('upgrade', (res, socket, head) => {
        try {
          this.vouch(host, res.headers);
        } catch (err) {
          socket.destroy();
          return reject(err);
        }
        if (head.length) socket.unshift(head);
        resolve({ socket });
      });
      req.on('response', (res) => {
        try {
          resolve({ answer: this.answer(host, res, 'GET') });
        } catch (err) {
          reject(err);
        }
      });
      req.end();
    });
  }

  /** The WebSocket URL and options of a host's route (a shell): the credential and certificates as for requests. */
  socket(host: HostTarget, path: string, headers: Record<string, string>): { url: string; options: ClientOptions; vouch: (headers: IncomingHttpHeaders) => void } {
    const url = this.target(host, path);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const options: ClientOptions = { headers: { ...headers, authorization: `Bearer ${this.credential}` } };
    if (this.tls) Object.assign(options, { cert: this.tls.cert, key: this.tls.key, ca: this.tls.ca });
    return { url: url.toString(), options, vouch: (h) => this.vouch(host, h) };
  }

  close(): void {
    this.agent.destroy();
  }
}

/** The internal endpoint's certificates, read from the files the operator named (null: plain HTTP). */
export async function readInternalTls(files: { certFile: string; keyFile: string; caFile?: string } | undefined): Promise<InternalTls | null> {
  if (!files) return null;
  const [cert, key, ca] = await Promise.all([readFile(files.certFile), readFile(files.keyFile), files.caFile ? readFile(files.caFile) : undefined]);
  return { cert, key, ca };
}

/** An API replica's id, kept in its data dir like a host's: its credential is issued to this holder. */
export async function readReplicaId(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'replica-id');
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (saved) return saved;
  const id = `rep_${randomBase62(22)}`;
  await writeFile(file, `${id}\n`);
  return id;
}
