/**
 * `agentvm vms cp`: files and directories between here and a VM's persist disk, one file per call of
 * the files API, streamed (never whole in memory), with a progress bar on stderr for large files when
 * it is a terminal. `VM:PATH` names the VM's side; PATH is relative to /persist/workspace unless absolute.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ClientError, resolveCredentials } from '../client/client.ts';

/** Files at least this large get a progress bar (when stderr is a terminal). */
const PROGRESS_FROM_BYTES = 1024 * 1024;

export interface RemotePath {
  vmId: string;
  path: string;
}

/** `vm_…:path` → the VM and its path; anything else is a local path. */
export function parseRemote(arg: string): RemotePath | null {
  const m = /^(vm_[A-Za-z0-9]+):(.*)$/.exec(arg);
  return m ? { vmId: m[1], path: m[2] === '' ? '.' : m[2] } : null;
}

const human = (n: number) => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

/** A one-line bar on stderr: name, share done, bytes and speed; only on a terminal, only for large files. */
export class ProgressBar {
  private done = 0;
  private last = 0;
  private readonly started = Date.now();
  private readonly shown: boolean;

  constructor(
    private readonly name: string,
    private readonly total: number,
    private readonly out: NodeJS.WriteStream = process.stderr,
  ) {
    this.shown = out.isTTY === true && total >= PROGRESS_FROM_BYTES;
  }

  /** A pass-through stream that counts what goes by. */
  counter(): Transform {
    return new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        this.add(chunk.length);
        cb(null, chunk);
      },
    });
  }

  add(n: number): void {
    this.done += n;
    const now = Date.now();
    if (this.shown && (now - this.last > 100 || this.done === this.total)) {
      this.last = now;
      this.draw();
    }
  }

  line(): string {
    const width = 24;
    const share = this.total ? Math.min(1, this.done / this.total) : 1;
    const filled = Math.round(share * width);
    const secs = Math.max(0.001, (Date.now() - this.started) / 1000);
    const name = this.name.length > 30 ? `…${this.name.slice(-29)}` : this.name;
    return `${name} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.floor(share * 100)).padStart(3)}% ${human(this.done)}/${human(this.total)} ${human(this.done / secs)}/s`;
  }

  private draw(): void {
    this.out.write(`\r${this.line()}\x1b[K`);
  }

  finish(): void {
    if (this.shown) {
      this.draw();
      this.out.write('\n');
    }
  }
}

interface Api {
  base: string;
  key: string;
}

async function api(): Promise<Api> {
  const { baseUrl, key } = await resolveCredentials();
  if (!key) throw new ClientError('unauthorized', 'no API key: run `agentvm login`, or set AGENTVM_API_KEY');
  return { base: baseUrl, key };
}

const filesUrl = (a: Api, r: RemotePath) => `${a.base}/v1/api/vms/${encodeURIComponent(r.vmId)}/files?path=${encodeURIComponent(r.path)}`;

async function failure(res: Response): Promise<ClientError> {
  const body = (await res.json().catch(() => ({}))) as { error?: string; message?: string; hint?: string };
  return new ClientError(body.error ?? `http_${res.status}`, body.message ?? '', body.hint, res.status);
}

async function send(url: string, init: RequestInit & { duplex?: 'half' }): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    throw new ClientError('unreachable', `cannot reach the agentvm server (${cause?.code ?? (err as Error).message})`, 'is `agentvm serve` running? check AGENTVM_BASE_URL');
  }
}

const join = (dir: string, name: string) => (dir === '.' ? name : `${dir.replace(/\/+$/, '')}/${name}`);

/** Local → VM: a file, or a directory's files (their tree made on the way). Answers the files and bytes sent. */
export async function upload(local: string, remote: RemotePath): Promise<{ files: number; bytes: number }> {
  const a = await api();
  const st = await stat(local).catch(() => null);
  if (!st) throw new ClientError('invalid_request', `${local}: no such file or directory`);
  // Into a directory the VM has (`VM:dir/`), or as the name given.
  const target = remote.path.endsWith('/') ? { ...remote, path: join(remote.path, path.basename(path.resolve(local))) } : remote;
  if (st.isFile()) return { files: 1, bytes: await uploadFile(a, local, target, st.size) };
  if (!st.isDirectory()) throw new ClientError('invalid_request', `${local}: not a file or a directory`);
  let files = 0;
  let bytes = 0;
  const walk = async (dir: string, rel: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      const to = { ...target, path: join(target.path, rel ? `${rel}/${e.name}` : e.name) };
      if (e.isDirectory()) await walk(full, rel ? `${rel}/${e.name}` : e.name);
      else if (e.isFile()) {
        bytes += await uploadFile(a, full, to, (await stat(full)).size);
        files++;
      }
      // Symbolic links and special files are left out: a link would point nowhere in the VM.
    }
  };
  await walk(local, '');
  return { files, bytes };
}

async function uploadFile(a: Api, local: string, remote: RemotePath, size: number): Promise<number> {
  const bar = new ProgressBar(remote.path, size);
  const body = Readable.toWeb(createReadStream(local).pipe(bar.counter())) as ReadableStream<Uint8Array>;
  const res = await send(filesUrl(a, remote), {
    method: 'PUT',
    headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/octet-stream', 'content-length': String(size) },
    body,
    duplex: 'half',
  });
  bar.finish();
  if (res.status !== 201) throw await failure(res);
  return ((await res.json()) as { size: number }).size;
}

interface Entry {
  name: string;
  type: 'file' | 'dir' | 'link';
  size: number;
}

/** VM → local: a file, or a directory's tree (links in it are left out). Answers the files and bytes received. */
export async function download(remote: RemotePath, local: string): Promise<{ files: number; bytes: number }> {
  const a = await api();
  const res = await send(filesUrl(a, remote), { headers: { authorization: `Bearer ${a.key}` } });
  if (res.status !== 200) throw await failure(res);
  const into = await stat(local).then((s) => s.isDirectory(), () => false);
  const remoteName = path.posix.basename(remote.path.replace(/\/+$/, '')) || 'workspace';
  const dest = into ? path.join(local, remoteName === '.' ? 'workspace' : remoteName) : local;
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) {
    const { data } = (await res.json()) as { data: Entry[] };
    return downloadDir(a, remote, data, dest);
  }
  const bytes = await saveFile(res, dest, remote.path);
  return { files: 1, bytes };
}

async function downloadDir(a: Api, remote: RemotePath, entries: Entry[], dest: string): Promise<{ files: number; bytes: number }> {
  await mkdir(dest, { recursive: true });
  let files = 0;
  let bytes = 0;
  for (const e of entries) {
    const child = { ...remote, path: join(remote.path, e.name) };
    if (e.type === 'link') continue;
    const res = await send(filesUrl(a, child), { headers: { authorization: `Bearer ${a.key}` } });
    if (res.status !== 200) throw await failure(res);
    if (e.type === 'dir') {
      const sub = await downloadDir(a, child, ((await res.json()) as { data: Entry[] }).data, path.join(dest, e.name));
      files += sub.files;
      bytes += sub.bytes;
    } else {
      bytes += await saveFile(res, path.join(dest, e.name), child.path);
      files++;
    }
  }
  return { files, bytes };
}

/** Writes a download beside its destination, then renames it into place: a cut download leaves no part. */
async function saveFile(res: Response, dest: string, name: string): Promise<number> {
  const size = Number(res.headers.get('content-length') ?? 0);
  const bar = new ProgressBar(name, size);
  const part = `${dest}.agentvm-part`;
  try {
    await pipeline(Readable.fromWeb(res.body as never), bar.counter(), createWriteStream(part));
    await rename(part, dest);
  } catch (err) {
    await rm(part, { force: true });
    throw new ClientError('unreachable', `the download of ${name} was cut short (${(err as Error).message})`);
  } finally {
    bar.finish();
  }
  return size;
}
