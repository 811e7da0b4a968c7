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
import { absolutePath, collect } from './guestFs.ts';
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
  const p = absolutePath(raw);
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
  const out = await collect(sb, ['cat', '--', p]);
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

async function write(services: Services, sb: SandboxContext, u: Upload): Promise<{ name: string; type: 'file'; path: string }> {
  const p = absolutePath(u.path);
  const name = p.slice(p.lastIndexOf('/') + 1);
  const disk = sb.user !== 'root' ? onPersist(p) : null;
  if (disk) {
    await services.files.write(sb.tenantId, sb.vmId, disk, u.body, u.size);
    return { name, type: 'file', path: p };
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
  const script =
    'f=$1; d=$(dirname -- "$f"); top=; while [ ! -d "$d" ]; do top=$d; d=$(dirname -- "$d"); done; ' +
    'mkdir -p -- "$(dirname -- "$f")" && cat > "$f" && if [ -n "$2" ]; then chown -- "$2" "$f" && { [ -z "$top" ] || chown -R -- "$2" "$top"; }; fi';
  const r = await collect({ ...sb, user: 'root' }, ['sh', '-c', script, 'sh', p, owner], Buffer.concat(parts));
  if (r.exitCode !== 0) {
    const code = /Permission denied/.test(r.stderr) ? 403 : /Is a directory|Not a directory/.test(r.stderr) ? 400 : 500;
    throw Object.assign(new Error(r.stderr.trim() || 'the write failed'), { code });
  }
  return { name, type: 'file', path: p };
}

export async function uploadFiles(services: Services, sb: SandboxContext, url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  const queryPath = url.searchParams.get('path');
  const uploads: Upload[] = [];
  try {
    if (type.startsWith('multipart/form-data')) {
      const form = await new Request('http://sandbox/files', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type']! },
        body: Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>,
        duplex: 'half',
      } as RequestInit).formData();
      for (const [, v] of form.entries()) {
        if (typeof v === 'string') continue;
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
    return sendError(res, 400, `body: ${(err as Error).message}`);
  }
  if (!uploads.length) return sendError(res, 400, 'body: no file in it');
  try {
    const written = [];
    for (const u of uploads) written.push(await write(services, sb, u));
    const body = JSON.stringify(written);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (typeof code === 'number') return sendError(res, code, (err as Error).message);
    const s = statusOf(err);
    sendError(res, s.code, s.message);
  }
}
