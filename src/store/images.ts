/**
 * The `images`, `image_build_log` and `image_layers` tables: a tenant's images from request to ready
 * or failed, what their builds printed, and each host's cache of built steps. Each function takes the
 * database or the transaction it runs in.
 */
import type { Queryable } from './db.ts';
import type { EgressPolicy } from '../net/egressPolicy.ts';
import type { ImageConfig } from '../wire/protocol.ts';

export type ImageStatus = 'queued' | 'building' | 'ready' | 'failed';

export interface ImageRow {
  image_id: string;
  tenant_id: string;
  name: string;
  slug: string;
  visibility: 'public' | 'private';
  status: ImageStatus;
  status_reason: string | null;
  parent: string;
  dockerfile: string;
  egress: EgressPolicy;
  config: ImageConfig;
  packages: Array<{ name: string; version: string }>;
  size_bytes: number;
  host_id: string | null;
  layer_path: string | null;
  last_seq: number;
  created_at: Date;
  ready_at: Date | null;
}

export interface NewImage {
  image_id: string;
  tenant_id: string;
  name: string;
  slug: string;
  visibility: 'public' | 'private';
  parent: string;
  dockerfile: string;
  context: Record<string, string>;
  egress: EgressPolicy;
  created_at: Date;
}

const COLUMNS = `image_id, tenant_id, name, slug, visibility, status, status_reason, parent, dockerfile, egress, config, packages,
                 size_bytes::float8 AS size_bytes, host_id, layer_path, last_seq, created_at, ready_at`;

/** What a tenant may see: its own images and the public ready ones, none deleted. */
const VISIBLE = `deleted_at IS NULL AND (tenant_id = $1 OR (visibility = 'public' AND status = 'ready'))`;

export async function insertQueued(q: Queryable, i: NewImage): Promise<ImageRow> {
  const [row] = await q.query<ImageRow>(
    `INSERT INTO images (image_id, tenant_id, name, slug, visibility, status, parent, dockerfile, context, egress, created_at)
     VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10) RETURNING ${COLUMNS}`,
    [i.image_id, i.tenant_id, i.name, i.slug, i.visibility, i.parent, i.dockerfile, JSON.stringify(i.context), JSON.stringify(i.egress), i.created_at],
  );
  return row;
}

/** One visible image by id, or by slug: the newest ready build of that name, the caller's own first. */
export async function getVisible(q: Queryable, tenantId: string, idOrSlug: string): Promise<ImageRow | undefined> {
  return visible<ImageRow>(q, tenantId, idOrSlug, COLUMNS);
}

/** The same, with only what a new VM of it needs (a create reads no Dockerfile nor package list: a third of the time). */
export async function getVisibleForVm(q: Queryable, tenantId: string, idOrSlug: string): Promise<Pick<ImageRow, 'image_id' | 'status' | 'host_id'> | undefined> {
  return visible(q, tenantId, idOrSlug, 'image_id, status, host_id');
}

async function visible<T>(q: Queryable, tenantId: string, idOrSlug: string, columns: string): Promise<T | undefined> {
  if (idOrSlug.startsWith('img_')) {
    const [row] = await q.query<T>(`SELECT ${columns} FROM images WHERE image_id = $2 AND ${VISIBLE}`, [tenantId, idOrSlug]);
    return row;
  }
  const [row] = await q.query<T>(
    `SELECT ${columns} FROM images WHERE slug = $2 AND status = 'ready' AND ${VISIBLE}
     ORDER BY (tenant_id = $1) DESC, ready_at DESC LIMIT 1`,
    [tenantId, idOrSlug],
  );
  return row;
}

export type ImageSort = 'new' | 'trending' | 'forks';

/** The VMs ever made of the image (the gallery's count of its use). */
const VMS_MADE = `(SELECT count(*) FROM vms v WHERE v.root_image_id = images.image_id)`;
/** As templates sort: trending is (2 × VMs made) / (age in hours + 2)^1.5, forks the VMs made. */
const IMAGE_ORDER: Record<ImageSort, string> = {
  new: 'created_at DESC, image_id',
  trending: `(2 * ${VMS_MADE})::float8 / power(extract(epoch FROM (now() - created_at)) / 3600 + 2, 1.5) DESC, created_at DESC, image_id`,
  forks: `${VMS_MADE} DESC, created_at DESC, image_id`,
};
/** `$2` the search text, `$3` the visibility asked for (or null: both). */
const FILTER = `($2::text IS NULL OR name ILIKE '%' || $2 || '%' OR slug ILIKE '%' || $2 || '%') AND ($3::text IS NULL OR visibility = $3)`;

export interface ImageFilter {
  search?: string;
  visibility?: 'public' | 'private';
}

export async function countVisible(q: Queryable, tenantId: string, f: ImageFilter = {}): Promise<number> {
  const [row] = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM images WHERE ${VISIBLE} AND ${FILTER}`, [tenantId, f.search ?? null, f.visibility ?? null]);
  return row.n;
}

/** A page of the visible images, newest first unless `sort` says otherwise. */
export function listVisible(q: Queryable, tenantId: string, o: ImageFilter & { limit: number; offset: number; sort?: ImageSort }): Promise<ImageRow[]> {
  return q.query<ImageRow>(
    `SELECT ${COLUMNS} FROM images WHERE ${VISIBLE} AND ${FILTER} ORDER BY ${IMAGE_ORDER[o.sort ?? 'new']} LIMIT $4 OFFSET $5`,
    [tenantId, o.search ?? null, o.visibility ?? null, o.limit, o.offset],
  );
}

/** The slug a tenant's earlier build of `name` has, if any (a rebuild keeps its slug). */
export async function slugOfName(q: Queryable, tenantId: string, name: string): Promise<string | undefined> {
  const [row] = await q.query<{ slug: string }>(`SELECT slug FROM images WHERE tenant_id = $1 AND name = $2 ORDER BY created_at LIMIT 1`, [tenantId, name]);
  return row?.slug;
}

/** Slugs starting with `prefix` that images of other tenants hold. */
export async function slugsOfOthers(q: Queryable, tenantId: string, prefix: string): Promise<Set<string>> {
  const rows = await q.query<{ slug: string }>(`SELECT DISTINCT slug FROM images WHERE tenant_id <> $1 AND slug LIKE $2 || '%'`, [tenantId, prefix]);
  return new Set(rows.map((r) => r.slug));
}

/** What still uses an image: VMs not deleted that start from it, images not deleted built on it. */
export async function users(q: Queryable, imageId: string): Promise<{ vms: number; images: number }> {
  const [row] = await q.query<{ vms: number; images: number }>(
    `SELECT (SELECT count(*)::int FROM vms WHERE root_image_id = $1 AND deleted_at IS NULL) AS vms,
            (SELECT count(*)::int FROM images WHERE parent = $1 AND deleted_at IS NULL AND status <> 'failed') AS images`,
    [imageId],
  );
  return row;
}

export async function markDeleted(q: Queryable, tenantId: string, imageId: string, now: Date): Promise<ImageRow | undefined> {
  const [row] = await q.query<ImageRow>(
    `UPDATE images SET deleted_at = $3, context = NULL WHERE tenant_id = $1 AND image_id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, imageId, now],
  );
  return row;
}

/**
 * Takes the oldest queued build this host can make (FROM base, or FROM an image whose layers are
 * here): it is `building` here from now on.
 */
export async function claimQueued(q: Queryable, hostId: string): Promise<(ImageRow & { context: Record<string, string> }) | undefined> {
  const [row] = await q.query<ImageRow & { context: Record<string, string> }>(
    `UPDATE images SET status = 'building', host_id = $1
     WHERE image_id = (SELECT image_id FROM images i WHERE status = 'queued' AND deleted_at IS NULL
                         AND (parent = 'base' OR EXISTS (SELECT 1 FROM images p WHERE p.image_id = i.parent AND p.host_id = $1))
                       ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT 1)
     RETURNING ${COLUMNS}, context`,
    [hostId],
  );
  return row;
}

/** Builds a crash interrupted on this host go back to the queue (built steps are cached). */
export async function requeueInterrupted(q: Queryable, hostId: string): Promise<string[]> {
  const rows = await q.query<{ image_id: string }>(
    `UPDATE images SET status = 'queued', host_id = NULL WHERE status = 'building' AND host_id = $1 RETURNING image_id`,
    [hostId],
  );
  return rows.map((r) => r.image_id);
}

/**
 * Builds whose host has been silent since `since`, whoever looks: queued again when a live host has
 * what they are FROM (their cached steps are lost with the host), else failed saying why.
 */
export async function takeOverLost(q: Queryable, since: Date): Promise<{ requeued: string[]; failed: string[] }> {
  const lost = `SELECT host_id FROM hosts WHERE heartbeat_at <= $1`;
  const requeued = await q.query<{ image_id: string }>(
    `UPDATE images i SET status = 'queued', host_id = NULL
     WHERE status = 'building' AND host_id IN (${lost})
       AND (parent = 'base' OR EXISTS (SELECT 1 FROM images p JOIN hosts h ON h.host_id = p.host_id WHERE p.image_id = i.parent AND h.heartbeat_at > $1))
     RETURNING image_id`,
    [since],
  );
  const failed = await q.query<{ image_id: string }>(
    `UPDATE images SET status = 'failed', context = NULL,
       status_reason = 'its host ' || host_id || ' stopped answering while building it, and the image it is FROM is on that host alone'
     WHERE status = 'building' AND host_id IN (${lost}) RETURNING image_id`,
    [since],
  );
  return { requeued: requeued.map((r) => r.image_id), failed: failed.map((r) => r.image_id) };
}

/** Whether the build is still this host's (another host takes over the builds of a host silent too long). */
export async function markReady(
  q: Queryable,
  imageId: string,
  r: { layerPath: string; sizeBytes: number; config: ImageConfig; packages: Array<{ name: string; version: string }> },
  now: Date,
  hostId?: string,
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE images SET status = 'ready', status_reason = NULL, layer_path = $2, size_bytes = $3, config = $4, packages = $5, ready_at = $6, context = NULL
     WHERE image_id = $1 AND ($7::text IS NULL OR (host_id = $7 AND status = 'building')) RETURNING image_id`,
    [imageId, r.layerPath, r.sizeBytes, JSON.stringify(r.config), JSON.stringify(r.packages), now, hostId ?? null],
  );
  return rows.length > 0;
}

export async function markFailed(q: Queryable, imageId: string, reason: string, hostId?: string): Promise<void> {
  await q.query(
    `UPDATE images SET status = 'failed', status_reason = $2, context = NULL WHERE image_id = $1 AND ($3::text IS NULL OR (host_id = $3 AND status = 'building'))`,
    [imageId, reason, hostId ?? null],
  );
}

/** The image's row whatever its tenant (a host's own look-up). */
export async function byId(q: Queryable, imageId: string): Promise<ImageRow | undefined> {
  const [row] = await q.query<ImageRow>(`SELECT ${COLUMNS} FROM images WHERE image_id = $1`, [imageId]);
  return row;
}

/** Appends a line to a build's log; answers its sequence number. */
export async function appendLog(q: Queryable, imageId: string, text: string, now: Date): Promise<number> {
  const [row] = await q.query<{ last_seq: number }>(`UPDATE images SET last_seq = last_seq + 1 WHERE image_id = $1 RETURNING last_seq`, [imageId]);
  await q.query(`INSERT INTO image_build_log (image_id, seq, at, text) VALUES ($1, $2, $3, $4)`, [imageId, row.last_seq, now, text]);
  return row.last_seq;
}

export function logAfter(q: Queryable, imageId: string, after: number, limit = 500): Promise<Array<{ seq: number; text: string }>> {
  return q.query(`SELECT seq, text FROM image_build_log WHERE image_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [imageId, after, limit]);
}

export async function layer(q: Queryable, hostId: string, key: string): Promise<{ path: string; size_bytes: number } | undefined> {
  const [row] = await q.query<{ path: string; size_bytes: number }>(
    `SELECT path, size_bytes::float8 AS size_bytes FROM image_layers WHERE host_id = $1 AND cache_key = $2`,
    [hostId, key],
  );
  return row;
}

export async function saveLayer(q: Queryable, hostId: string, key: string, path: string, sizeBytes: number, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO image_layers (host_id, cache_key, path, size_bytes, created_at, used_at) VALUES ($1, $2, $3, $4, $5, $5)
     ON CONFLICT (host_id, cache_key) DO UPDATE SET path = excluded.path, size_bytes = excluded.size_bytes, used_at = excluded.used_at`,
    [hostId, key, path, sizeBytes, now],
  );
}

/** A tenant's images that count against its quota (not deleted, not failed): their number and bytes. */
export async function usage(q: Queryable, tenantId: string): Promise<{ images: number; bytes: number }> {
  const [row] = await q.query<{ images: number; bytes: number }>(
    `SELECT count(*)::int AS images, coalesce(sum(size_bytes), 0)::float8 AS bytes FROM images
     WHERE tenant_id = $1 AND deleted_at IS NULL AND status <> 'failed'`,
    [tenantId],
  );
  return row;
}

/** The root layer a VM's image gives it, or null (base). */
export async function layerOfVm(q: Queryable, vmId: string): Promise<{ layer_path: string | null; config: ImageConfig } | null> {
  const [row] = await q.query<{ layer_path: string | null; config: ImageConfig }>(
    `SELECT i.layer_path, i.config FROM vms v JOIN images i ON i.image_id = v.root_image_id WHERE v.vm_id = $1`,
    [vmId],
  );
  return row ?? null;
}

export async function setVmImage(q: Queryable, vmId: string, imageId: string): Promise<void> {
  await q.query(`UPDATE vms SET root_image_id = $2 WHERE vm_id = $1`, [vmId, imageId]);
}

/** The packages of the newest ready image whose last layer is `layerPath` (a build wholly from the cache). */
export async function packagesOfLayer(q: Queryable, layerPath: string): Promise<Array<{ name: string; version: string }> | null> {
  const [row] = await q.query<{ packages: Array<{ name: string; version: string }> }>(
    `SELECT packages FROM images WHERE layer_path = $1 AND status = 'ready' ORDER BY ready_at DESC LIMIT 1`,
    [layerPath],
  );
  return row?.packages ?? null;
}

/** Cached steps a build has just taken: their layers were used now. */
export async function touchLayers(q: Queryable, hostId: string, paths: string[], now: Date): Promise<void> {
  if (paths.length === 0) return;
  await q.query(`UPDATE image_layers SET used_at = $3 WHERE host_id = $1 AND path = ANY($2::text[])`, [hostId, paths, now]);
}

/** The step cache of a host: each cached layer and when a build last made or took it. */
export function layersOfHost(q: Queryable, hostId: string): Promise<Array<{ cache_key: string; path: string; used_at: Date }>> {
  return q.query(`SELECT cache_key, path, used_at FROM image_layers WHERE host_id = $1`, [hostId]);
}

export async function forgetLayer(q: Queryable, hostId: string, key: string): Promise<void> {
  await q.query(`DELETE FROM image_layers WHERE host_id = $1 AND cache_key = $2`, [hostId, key]);
}

/**
 * The last layers images of this host still need: images not deleted (ready, or being built on them),
 * and whatever image a VM not deleted starts from.
 */
export async function liveLayerPaths(q: Queryable, hostId: string): Promise<string[]> {
  const rows = await q.query<{ layer_path: string }>(
    `SELECT layer_path FROM images WHERE host_id = $1 AND layer_path IS NOT NULL AND deleted_at IS NULL
     UNION
     SELECT i.layer_path FROM vms v JOIN images i ON i.image_id = v.root_image_id WHERE v.deleted_at IS NULL AND i.layer_path IS NOT NULL`,
    [hostId],
  );
  return rows.map((r) => r.layer_path);
}
