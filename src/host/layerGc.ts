/**
 * Garbage collection of a host's image layers. A layer stays while something needs it: the last layer
 * of an image not deleted, or of the image a VM not deleted starts from, and every layer under those
 * (their qcow2 backing chains); and a cached step a build made or took within `keepUnusedMs`. The rest
 * goes: cached steps unused for longer, the layers of deleted images, and files of the layers
 * directory nothing names (a copy a crash cut short).
 *
 * It decides from the database and the files alone, so it is safe across a restart: a cache entry is
 * forgotten before its file is removed (a crash between leaves a file nothing names, removed next
 * time), and a build takes a cached layer only if its file is there. The builder runs it between
 * builds, never beside one.
 */
import { open, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../store/db.ts';
import * as imageStore from '../store/images.ts';

/** How long a cached step no image uses is kept for a later build: 7 days. */
export const KEEP_UNUSED_MS = 7 * 24 * 3600_000;

export interface LayerGcOutcome {
  /** Layer files removed, and their bytes. */
  removed: number;
  bytes: number;
  /** Layer files kept. */
  kept: number;
}

/** The backing file a qcow2 names in its header, or null. */
export async function backingOf(file: string): Promise<string | null> {
  const fh = await open(file, 'r');
  try {
    const head = Buffer.alloc(20);
    await fh.read(head, 0, 20, 0);
    const offset = Number(head.readBigUInt64BE(8));
    const size = head.readUInt32BE(16);
    if (offset === 0 || size === 0) return null;
    const name = Buffer.alloc(size);
    await fh.read(name, 0, size, offset);
    const p = name.toString();
    return path.isAbsolute(p) ? p : path.join(path.dirname(file), p);
  } finally {
    await fh.close();
  }
}

/** `layer` and every layer under it (a file that is gone ends the chain). */
export async function chainOf(layer: string): Promise<string[]> {
  const out: string[] = [];
  let file: string | null = layer;
  while (file && !out.includes(file)) {
    out.push(file);
    file = await backingOf(file).catch(() => null);
  }
  return out;
}

/** Bytes of a layer and every layer under it. */
export async function chainBytes(layer: string): Promise<number> {
  let total = 0;
  for (const f of await chainOf(layer)) total += (await stat(f)).size;
  return total;
}

export async function collectLayers(o: { db: Db; hostId: string; layersDir: string; now: Date; keepUnusedMs?: number }): Promise<LayerGcOutcome> {
  const keepUnusedMs = o.keepUnusedMs ?? KEEP_UNUSED_MS;
  const dir = path.resolve(o.layersDir);
  const live = new Set<string>();
  const keep = async (layer: string) => {
    for (const f of await chainOf(path.resolve(layer))) live.add(f);
  };
  for (const p of await imageStore.liveLayerPaths(o.db, o.hostId)) await keep(p);
  const cached = await imageStore.layersOfHost(o.db, o.hostId);
  for (const c of cached) {
    if (o.now.getTime() - new Date(c.used_at).getTime() < keepUnusedMs) await keep(c.path);
  }
  // Forgotten first, then removed: a crash between leaves a file nothing names.
  for (const c of cached) {
    if (!live.has(path.resolve(c.path))) await imageStore.forgetLayer(o.db, o.hostId, c.cache_key);
  }
  const outcome: LayerGcOutcome = { removed: 0, bytes: 0, kept: 0 };
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const file = path.join(dir, name);
    if (live.has(file)) {
      outcome.kept++;
      continue;
    }
    const size = await stat(file).then((s) => (s.isFile() ? s.blocks * 512 : -1)).catch(() => -1);
    if (size < 0) continue;
    await rm(file, { force: true });
    outcome.removed++;
    outcome.bytes += size;
  }
  return outcome;
}
