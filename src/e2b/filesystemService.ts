/**
 * E2B's `filesystem.Filesystem` service over Connect, for the request's sandbox: stat, list (to a
 * depth), make a directory, move, remove (guestFs.ts), and watching a directory by looking at it
 * again every half second (the guest agent has no inotify of its own to lend).
 */
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { EventType, FileType, Filesystem, type EntryInfoSchema, type FilesystemEventSchema } from './gen/filesystem_pb.ts';
import { sandboxOf, type SandboxContext } from './context.ts';
import { absolutePath, fsOp, type Entry } from './guestFs.ts';

type EntryInit = MessageInitShape<typeof EntryInfoSchema>;
type EventInit = MessageInitShape<typeof FilesystemEventSchema>;

const TYPES = { file: FileType.FILE, dir: FileType.DIRECTORY, symlink: FileType.SYMLINK } as const;

function permissions(mode: number, type: Entry['type']): string {
  const c = type === 'dir' ? 'd' : type === 'symlink' ? 'L' : '-';
  let s = '';
  for (let i = 8; i >= 0; i--) s += mode & (1 << i) ? 'rwx'[(8 - i) % 3] : '-';
  return c + s;
}

/** agentvm's sandbox user (`agent`, uid 1000) by E2B's name for it, `user`. */
const e2bName = (n: string) => (n === 'agent' ? 'user' : n);

export function entryInfo(e: Entry): EntryInit {
  return {
    name: e.name,
    type: TYPES[e.type],
    path: e.path,
    size: BigInt(e.size),
    mode: e.mode,
    permissions: permissions(e.mode, e.type),
    owner: e2bName(e.owner),
    group: e2bName(e.group),
    modifiedTime: timestampFromMs(e.mtimeS * 1000),
    ...(e.symlinkTarget !== null ? { symlinkTarget: e.symlinkTarget } : {}),
    ...(e.metadata ? { metadata: e.metadata } : {}),
  };
}

const CODES = { not_found: Code.NotFound, exists: Code.AlreadyExists, not_dir: Code.InvalidArgument, denied: Code.PermissionDenied, failed: Code.Internal } as const;

function checkedPath(p: string, field = 'path', user?: string): string {
  if (!p) throw new ConnectError(`${field}: give a path`, Code.InvalidArgument);
  if (p.includes('\0')) throw new ConnectError(`${field}: a path has no NUL`, Code.InvalidArgument);
  return absolutePath(p, user);
}

async function run(sb: SandboxContext, op: Parameters<typeof fsOp>[1], ...args: string[]): Promise<Entry[]> {
  const r = await fsOp(sb, op, ...args);
  if ('fault' in r) {
    const what = r.fault === 'not_found' ? `${args[0]}: no such file or directory` : r.fault === 'exists' ? `${args[0]}: already exists` : r.fault === 'not_dir' ? `${args[0]}: not a directory` : r.message;
    throw new ConnectError(what, CODES[r.fault as keyof typeof CODES] ?? Code.Internal);
  }
  return r.entries;
}

/** The entries under a directory as a map by path: what a watcher compares. */
async function snapshot(sb: SandboxContext, dir: string, recursive: boolean): Promise<Map<string, Entry>> {
  return new Map((await run(sb, 'list', dir, recursive ? '64' : '1')).map((e) => [e.path, e]));
}

export function changes(before: Map<string, Entry>, after: Map<string, Entry>, dir: string, withEntry: boolean): EventInit[] {
  const out: EventInit[] = [];
  const rel = (p: string) => p.slice(dir === '/' ? 1 : dir.length + 1);
  for (const [p, e] of after) {
    const was = before.get(p);
    if (!was) {
      out.push({ name: rel(p), type: EventType.CREATE, ...(withEntry ? { entry: entryInfo(e) } : {}) });
      // A file made and written since the last look: its writes are told too, as inotify tells them.
      if (e.type === 'file' && e.size > 0) out.push({ name: rel(p), type: EventType.WRITE, ...(withEntry ? { entry: entryInfo(e) } : {}) });
    } else if (was.mtimeS !== e.mtimeS || was.size !== e.size) out.push({ name: rel(p), type: EventType.WRITE, ...(withEntry ? { entry: entryInfo(e) } : {}) });
    else if (was.mode !== e.mode) out.push({ name: rel(p), type: EventType.CHMOD, ...(withEntry ? { entry: entryInfo(e) } : {}) });
  }
  for (const p of before.keys()) if (!after.has(p)) out.push({ name: rel(p), type: EventType.REMOVE });
  return out;
}

const WATCH_EVERY_MS = 500;

interface Watcher {
  vmId: string;
  dir: string;
  recursive: boolean;
  withEntry: boolean;
  last: Map<string, Entry>;
}
const watchers = new Map<string, Watcher>();

export function filesystemService(): ServiceImpl<typeof Filesystem> {
  return {
    async stat(req, ctx) {
      const [e] = await run(sandboxOf(ctx), 'stat', checkedPath(req.path, 'path', sandboxOf(ctx).user));
      return { entry: entryInfo(e) };
    },
    async listDir(req, ctx) {
      const entries = await run(sandboxOf(ctx), 'list', checkedPath(req.path, 'path', sandboxOf(ctx).user), String(req.depth || 1));
      return { entries: entries.map(entryInfo) };
    },
    async makeDir(req, ctx) {
      const [e] = await run(sandboxOf(ctx), 'mkdir', checkedPath(req.path, 'path', sandboxOf(ctx).user));
      return { entry: entryInfo(e) };
    },
    async move(req, ctx) {
      const [e] = await run(sandboxOf(ctx), 'move', checkedPath(req.source, 'source', sandboxOf(ctx).user), checkedPath(req.destination, 'destination', sandboxOf(ctx).user));
      return { entry: entryInfo(e) };
    },
    async remove(req, ctx) {
      await run(sandboxOf(ctx), 'remove', checkedPath(req.path, 'path', sandboxOf(ctx).user));
      return {};
    },
    async *watchDir(req, ctx) {
      const sb = sandboxOf(ctx);
      const dir = checkedPath(req.path, 'path', sb.user);
      let last = await snapshot(sb, dir, req.recursive);
      yield { event: { case: 'start', value: {} } };
      let quiet = 0;
      while (!ctx.signal.aborted) {
        await new Promise((r) => setTimeout(r, WATCH_EVERY_MS));
        if (ctx.signal.aborted) return;
        const now = await snapshot(sb, dir, req.recursive).catch(() => null);
        if (!now) return;
        const events = changes(last, now, dir, req.includeEntry);
        last = now;
        for (const ev of events) yield { event: { case: 'filesystem', value: ev } };
        if (!events.length && ++quiet * WATCH_EVERY_MS >= 30_000) {
          quiet = 0;
          yield { event: { case: 'keepalive', value: {} } };
        }
      }
    },
    async createWatcher(req, ctx) {
      const sb = sandboxOf(ctx);
      const dir = checkedPath(req.path, 'path', sb.user);
      const id = `w_${Math.random().toString(36).slice(2, 12)}`;
      watchers.set(id, { vmId: sb.vmId, dir, recursive: req.recursive, withEntry: req.includeEntry, last: await snapshot(sb, dir, req.recursive) });
      return { watcherId: id };
    },
    async getWatcherEvents(req, ctx) {
      const sb = sandboxOf(ctx);
      const w = watchers.get(req.watcherId);
      if (!w || w.vmId !== sb.vmId) throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      const now = await snapshot(sb, w.dir, w.recursive);
      const events = changes(w.last, now, w.dir, w.withEntry);
      w.last = now;
      return { events };
    },
    async removeWatcher(req, ctx) {
      const w = watchers.get(req.watcherId);
      if (!w || w.vmId !== sandboxOf(ctx).vmId) throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      watchers.delete(req.watcherId);
      return {};
    },
  };
}
