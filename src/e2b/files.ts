/**
 * E2B's `/files` of a sandbox: a download (`GET ?path=`) and an upload (`POST ?path=`, a multipart
 * form of `file` parts, or the bytes as `application/octet-stream`). Paths on the persist disk go by
 * agentvm's files API (the VM's data port, streamed both ways); a path elsewhere in the guest (`/tmp`,
 * `/etc`) by a process of the sandbox's user (`cat`), whole in memory, up to the same 100 MiB.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { E2bError, e2bErrorOf } from './errors.ts';
import { MAX_FILE_BYTES } from '../domain/guestAccess.ts';
import { E2B_HOME, HARNESS_USER, WORKSPACE } from '../wire/protocol.ts';
import type { Services } from '../domain/services.ts';
import type { SandboxContext } from './context.ts';
import { absolutePath, collect, FILE_ENVELOPE_BYTES, fsOp, XATTR_PERL } from './guestFs.ts';
import { sendError } from './sandboxPlane.ts';

/** The path on the persist disk an E2B path names (E2B's user directory is the workspace), or null. */
function onPersist(p: string): string | null {
  const q = p === E2B_HOME || p.startsWith(`${E2B_HOME}/`) ? WORKSPACE + p.slice(E2B_HOME.length) : p;
  return q.startsWith('/persist/') && !q.startsWith('/persist/.agentvm') && !q.startsWith('/persist/lost+found') ? q : null;
}

function statusOf(err: unknown): { code: number; message: string } {
  const known = e2bErrorOf(err);
  if (known) return { code: known.status, message: known.message };
  return { code: 500, message: (err as Error).message };
}

export async function downloadFile(services: Services, sb: SandboxContext, url: URL, _req: IncomingMessage, res: ServerResponse): Promise<void> {
  const raw = url.searchParams.get('path');
  if (!raw) return sendError(res, 400, 'path: give the file to read');
  const p = absolutePath(raw, sb.user);
  const disk = sb.user !== 'root' ? onPersist(p) : null;
  if (disk) {
    let r;
    try {
      r = await services.files.read(sb.tenantId, sb.vmId, disk);
    } catch (err) {
      const s = statusOf(err);
      return sendError(res, s.code, s.code === 404 ? `path '${raw}' does not exist` : s.message);
    }
    if (r.kind === 'dir') return sendError(res, 400, `path '${raw}' is a directory`);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(r.size) });
    const body = Readable.fromWeb(r.body as never);
    body.on('error', () => res.destroy());
    body.pipe(res);
    return;
  }
  // Outside the persist disk a process reads it: at most the files' cap (an endless file is cut off), and not past its client.
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  let out;
  try {
    out = await collect(sb, ['cat', '--', p], undefined, { maxBytes: MAX_FILE_BYTES, signal: gone.signal });
  } catch (err) {
    if (!(err instanceof E2bError)) throw err;
    return sendError(res, err.status, err.status === 413 ? `path '${raw}' is larger than 100 MiB` : err.message);
  }
  if (out.exitCode !== 0) {
    if (/No such file/.test(out.stderr)) return sendError(res, 404, `path '${raw}' does not exist`);
    if (/Is a directory/.test(out.stderr)) return sendError(res, 400, `path '${raw}' is a directory`);
    if (/Permission denied/.test(out.stderr)) return sendError(res, 403, `path '${raw}': permission denied`);
    return sendError(res, 500, out.stderr.trim() || 'the read failed');
  }
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(out.stdout.length) }).end(out.stdout);
}

interface Upload {
  path: string;
  body: AsyncIterable<Uint8Array>;
  size?: number;
}

async function* once(b: Uint8Array): AsyncIterable<Uint8Array> {
  yield b;
}

/**
 * A file written as root (E2B's envd writes so): the directories it needs made, the bytes on stdin
 * written over it (the same file, as `cat >` would: its links and its mode kept), the file and the
 * directories made for it given to `owner` where one is named, then its metadata set (what it had
 * before removed). One process, where a shell took five or more (each 40–60 ms under emulation).
 */
export const WRITE_PROGRAM = String.raw`
use strict; use POSIX ();
my ($f, $owner, @kv) = map { pack('H*', $_) } @ARGV;
sub fault { print STDERR "$!
"; exit 1 }
${XATTR_PERL}
(my $d = $f) =~ s{/[^/]*$}{}; my @made;
while (length $d && !-d $d) { unshift @made, $d; $d =~ s{/[^/]*$}{} }
for (@made) { mkdir $_, 0755 or -d $_ or fault() }
open(my $out, '>', $f) or fault(); binmode STDIN; binmode $out; my $buf;
while (1) { my $n = sysread(STDIN, $buf, 1 << 20); defined $n or fault(); last unless $n; print $out $buf or fault() }
close $out or fault();
if (length $owner) { my ($u, $g) = split /:/, $owner; chown $u, $g, $f, @made or fault() }
setmeta($f, @kv);
`;

interface Written {
  name: string;
  type: 'file';
  path: string;
  metadata?: Record<string, string>;
}

async function write(services: Services, sb: SandboxContext, u: Upload, metadata: Record<string, string>): Promise<Written> {
  const p = absolutePath(u.path, sb.user);
  const name = p.slice(p.lastIndexOf('/') + 1);
  const kv = Object.entries(metadata).flat();
  const written: Written = { name, type: 'file', path: p, ...(kv.length ? { metadata } : {}) };
  const disk = sb.user !== 'root' ? onPersist(p) : null;
  if (disk) {
    // A new file in the place of the old (files API): it has no metadata but what is set now.
    await services.files.write(sb.tenantId, sb.vmId, disk, u.body, u.size);
    if (!kv.length) return written;
    const r = await fsOp(sb, 'setmeta', p, ...kv);
    if ('fault' in r) throw Object.assign(new Error(`metadata: ${r.message}`), { code: r.fault === 'denied' ? 403 : /not supported/i.test(r.message) ? 400 : 500 });
    return written;
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of u.body) {
    size += c.byteLength;
    if (size > MAX_FILE_BYTES) throw new E2bError(413, 'the file is larger than 100 MiB');
    parts.push(Buffer.from(c));
  }
  // As E2B's envd: written by root, the file and the directories made for it then given to the
  // request's user (who has passwordless sudo anyway), so a user may write outside its own directories.
  const owner = sb.user === 'root' ? '' : `${HARNESS_USER.uid}:${HARNESS_USER.gid}`;
  const hexed = [p, owner, ...kv].map((x) => Buffer.from(x).toString('hex'));
  const r = await collect({ ...sb, user: 'root' }, ['perl', '-e', WRITE_PROGRAM, ...hexed], Buffer.concat(parts));
  if (r.exitCode !== 0) {
    const code = /Permission denied/.test(r.stderr) ? 403 : /Is a directory|Not a directory|not supported/.test(r.stderr) ? 400 : 500;
    throw Object.assign(new Error(r.stderr.trim() || 'the write failed'), { code });
  }
  return written;
}

/** E2B's metadata keys travel as header names, `X-Metadata-<key>`: HTTP tokens; values printable ASCII. */
const METADATA_HEADER = /^x-metadata-/i;
const METADATA_KEY = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
const METADATA_VALUE = /^[\x20-\x7e]*$/;

/** The request's metadata (its keys as the client sent them), or an error's words. */
export function metadataOf(rawHeaders: string[]): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (!METADATA_HEADER.test(rawHeaders[i])) continue;
    const key = rawHeaders[i].slice('x-metadata-'.length);
    const value = rawHeaders[i + 1];
    if (!METADATA_KEY.test(key)) return `metadata: the key ${JSON.stringify(key)} is not an HTTP token`;
    if (!METADATA_VALUE.test(value)) return `metadata: the value of ${JSON.stringify(key)} is not printable US-ASCII`;
    out[key] = value;
  }
  return out;
}

/** The request's bytes, refused (413) at the byte that goes over `max` (a multipart body is parsed in memory). */
async function* capped(req: IncomingMessage, max: number): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new E2bError(413, 'the upload is larger than 100 MiB');
    yield chunk;
  }
}

export async function uploadFiles(services: Services, sb: SandboxContext, url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  const queryPath = url.searchParams.get('path');
  const uploads: Upload[] = [];
  const metadata = metadataOf(req.rawHeaders);
  if (typeof metadata === 'string') return sendError(res, 400, metadata);
  try {
    if (type.startsWith('multipart/form-data')) {
      const form = await new Request('http://sandbox/files', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type']! },
        body: Readable.toWeb(Readable.from(capped(req, FILE_ENVELOPE_BYTES))) as unknown as ReadableStream<Uint8Array>,
        duplex: 'half',
      } as RequestInit).formData();
      for (const [field, v] of form.entries()) {
        // A `file` field sent as text (no file name) is the file's bytes, at the URL's path (as envd takes it).
        if (typeof v === 'string') {
          if (field !== 'file' || !queryPath) continue;
          const bytes = Buffer.from(v);
          uploads.push({ path: queryPath, body: once(bytes), size: bytes.length });
          continue;
        }
        const file = v as File;
        const p = queryPath ?? file.name;
        if (!p) return sendError(res, 400, 'path: give the path of each file');
        uploads.push({ path: p, body: once(new Uint8Array(await file.arrayBuffer())), size: file.size });
      }
    } else {
      if (!queryPath) return sendError(res, 400, 'path: give the file to write');
      const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
      if (encoding !== 'identity' && encoding !== 'gzip') return sendError(res, 400, 'Content-Encoding: gzip, or the bytes as they are');
      if (encoding === 'gzip') uploads.push({ path: queryPath, body: req.pipe(createGunzip()) });
      else uploads.push({ path: queryPath, body: req, size: req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) : undefined });
    }
  } catch (err) {
    if (err instanceof E2bError) return sendError(res, err.status, err.message, { Connection: 'close' });
    return sendError(res, 400, `body: ${(err as Error).message}`);
  }
  if (!uploads.length) return sendError(res, 400, 'body: no file in it');
  try {
    const written = [];
    for (const u of uploads) written.push(await write(services, sb, u, metadata));
    const body = JSON.stringify(written);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (typeof code === 'number') return sendError(res, code, (err as Error).message);
    const s = statusOf(err);
    sendError(res, s.code, s.message);
  }
}
