/**
 * The `templates` table: the gallery a tenant sees (its own templates and the public ready ones),
 * captures from start to ready or failed, and forks counted. Each function takes the database or the
 * transaction it runs in.
 */
import type { Queryable } from './db.ts';
import type { ScrubReport } from '../wire/protocol.ts';

export interface TemplateRow {
  template_id: string;
  tenant_id: string | null;
  slug: string;
  name: string;
  description: string;
  harness: string;
  plan: string | null;
  visibility: 'public' | 'private';
  tags: string[];
  forks: number;
  stars: number;
  size_bytes: number;
  status: 'capturing' | 'ready' | 'failed';
  /** Set when a public capture is ready; null while capturing and for a private template. */
  scrub_report: ScrubReport | null;
  created_at: Date;
}

export type TemplateSort = 'trending' | 'new' | 'forks' | 'stars';

/** What narrows a gallery listing. */
export interface TemplateFilter {
  q?: string;
  harness?: string;
  tag?: string;
}

export interface TemplateQuery extends TemplateFilter {
  sort: TemplateSort;
  limit: number;
  offset: number;
}

/** A capture's new row: the source VM's harness and plan, its slug already unique. */
export interface NewCapture {
  template_id: string;
  tenant_id: string;
  slug: string;
  name: string;
  harness: string;
  plan: string | null;
  visibility: 'public' | 'private';
  tags: string[];
  source_vm_id: string;
  created_at: Date;
}

const COLUMNS = `template_id, tenant_id, slug, name, description, harness, plan, visibility, tags, forks, stars,
                 size_bytes, status, scrub_report, created_at`;

/**
 * Trending: the stored `hot` score (migration 005): forks count twice as much as stars, on a log
 * scale, plus creation time, so ten times the popularity is worth 12.5 hours of youth and a young
 * template with a few forks passes an old one with many. Its order never changes with time, so the
 * first page is an index scan however large the gallery.
 */
const ORDER: Record<TemplateSort, string> = {
  trending: 'hot DESC',
  new: 'created_at DESC',
  forks: 'forks DESC, created_at DESC',
  stars: 'stars DESC, created_at DESC',
};

// ---- what a tenant sees (its tenant id in every WHERE) ----

/**
 * The two sets a tenant's listing merges, each read apart so that each has its index: its own
 * templates (any status), and the rest of the public gallery (ready ones). `$1` is the tenant.
 */
function listedSets(tenantId: string, filter: TemplateFilter): { own: string; gallery: string; params: unknown[] } {
  const params: unknown[] = [tenantId];
  const where: string[] = [];
  if (filter.q) {
    params.push(filter.q);
    where.push(`search @@ websearch_to_tsquery('english', $${params.length})`);
  }
  if (filter.harness) {
    params.push(filter.harness);
    where.push(`harness = $${params.length}`);
  }
  if (filter.tag) {
    params.push(filter.tag);
    where.push(`$${params.length} = ANY (tags)`);
  }
  const and = where.map((w) => ` AND ${w}`).join('');
  return {
    own: `FROM templates WHERE tenant_id = $1${and}`,
    gallery: `FROM templates WHERE visibility = 'public' AND status = 'ready' AND tenant_id IS DISTINCT FROM $1${and}`,
    params,
  };
}

/** How many templates the tenant's listing holds in all. */
export async function countListed(q: Queryable, tenantId: string, filter: TemplateFilter): Promise<number> {
  const { own, gallery, params } = listedSets(tenantId, filter);
  const [row] = await q.query<{ total: number }>(`SELECT ((SELECT count(*) ${own}) + (SELECT count(*) ${gallery}))::int AS total`, params);
  return row.total;
}

/** One page of the tenant's listing: each set sorted and cut on its own (an index scan for the gallery's), then merged. */
export function listPage(q: Queryable, tenantId: string, query: TemplateQuery): Promise<TemplateRow[]> {
  const { own, gallery, params } = listedSets(tenantId, query);
  const order = `${ORDER[query.sort]}, template_id`;
  params.push(query.limit + query.offset, query.limit, query.offset);
  const [upto, limit, offset] = [params.length - 2, params.length - 1, params.length];
  return q.query<TemplateRow>(
    `SELECT ${COLUMNS} FROM ((SELECT ${COLUMNS}, hot ${own} ORDER BY ${order} LIMIT $${upto})
                            UNION ALL (SELECT ${COLUMNS}, hot ${gallery} ORDER BY ${order} LIMIT $${upto})) t
     ORDER BY ${order} LIMIT $${limit} OFFSET $${offset}`,
    params,
  );
}

/** By `tpl_` id, the tenant's own slug, or a public slug, in that order. */
export async function getVisible(q: Queryable, tenantId: string, idOrSlug: string): Promise<TemplateRow | undefined> {
  const [row] = await q.query<TemplateRow>(
    `SELECT ${COLUMNS} FROM templates
     WHERE (tenant_id = $1 OR (visibility = 'public' AND status = 'ready'))
       AND (template_id = $2 OR slug = $2)
     ORDER BY (template_id = $2) DESC, (tenant_id IS NOT DISTINCT FROM $1) DESC
     LIMIT 1`,
    [tenantId, idOrSlug],
  );
  return row;
}

/** Slugs starting with `prefix` that a new template of the tenant would clash with: its own, and with `inPublic` the public ones. */
export async function slugsTaken(q: Queryable, tenantId: string, inPublic: boolean, prefix: string): Promise<Set<string>> {
  const rows = await q.query<{ slug: string }>(
    `SELECT slug FROM templates WHERE (tenant_id = $1 OR ($2 AND visibility = 'public')) AND slug LIKE $3`,
    [tenantId, inPublic, `${prefix}%`],
  );
  return new Set(rows.map((r) => r.slug));
}

/** A capture starts: its row in status `capturing`. */
export async function insertCapturing(q: Queryable, t: NewCapture): Promise<TemplateRow> {
  const [inserted] = await q.query<TemplateRow>(
    `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, plan, visibility, tags, status, source_vm_id, created_at)
     VALUES ($1, $2, $3, $4, '', $5, $6, $7, $8, 'capturing', $9, $10) RETURNING ${COLUMNS}`,
    [t.template_id, t.tenant_id, t.slug, t.name, t.harness, t.plan, t.visibility, t.tags, t.source_vm_id, t.created_at],
  );
  return inserted;
}

export async function countFork(q: Queryable, templateId: string): Promise<void> {
  await q.query('UPDATE templates SET forks = forks + 1 WHERE template_id = $1', [templateId]);
}

// ---- what the host of a capture or a fork reads and records ----

/** Where a ready template's disk image is (a fork's persist disk starts as it). */
export async function imagePath(q: Queryable, templateId: string): Promise<string | null> {
  const [row] = await q.query<{ image_path: string | null }>('SELECT image_path FROM templates WHERE template_id = $1', [templateId]);
  return row?.image_path ?? null;
}

/** A capture still to be done. */
export async function getCapturing(q: Queryable, templateId: string): Promise<{ template_id: string; source_vm_id: string; visibility: string } | undefined> {
  const [t] = await q.query<{ template_id: string; source_vm_id: string; visibility: string }>(
    `SELECT template_id, source_vm_id, visibility FROM templates WHERE template_id = $1 AND status = 'capturing'`,
    [templateId],
  );
  return t;
}

export async function markReady(
  q: Queryable,
  templateId: string,
  image: { path: string; sizeBytes: number; scrubReport: ScrubReport | null },
  now: Date,
): Promise<void> {
  await q.query(
    `UPDATE templates SET status = 'ready', image_path = $2, size_bytes = $3, scrub_report = $4, updated_at = $5 WHERE template_id = $1`,
    [templateId, image.path, image.sizeBytes, image.scrubReport ? JSON.stringify(image.scrubReport) : null, now],
  );
}

/** The capture on its host failed. */
export async function markFailed(q: Queryable, templateId: string, reason: string, now: Date): Promise<void> {
  await q.query(`UPDATE templates SET status = 'failed', status_reason = $2, updated_at = $3 WHERE template_id = $1`, [templateId, reason, now]);
}

/** The capture never reached its host (an API replica could not hand it over): failed, unless it got under way. */
export async function markUndelivered(q: Queryable, templateId: string, reason: string): Promise<void> {
  await q.query(`UPDATE templates SET status = 'failed', status_reason = $2 WHERE template_id = $1 AND status = 'capturing'`, [templateId, reason]);
}

/** Captures of this host's VMs that a restart interrupted fail; answers their ids. */
export async function failInterruptedOnHost(q: Queryable, hostId: string, now: Date): Promise<string[]> {
  const rows = await q.query<{ template_id: string }>(
    `UPDATE templates t SET status = 'failed', status_reason = 'the capture was interrupted by a server restart', updated_at = $2
     FROM vms v WHERE t.status = 'capturing' AND v.vm_id = t.source_vm_id AND v.host_id = $1 RETURNING t.template_id`,
    [hostId, now],
  );
  return rows.map((r) => r.template_id);
}

/** A template by id, whoever owns it (the owner's event reports it). */
export async function byId(q: Queryable, templateId: string): Promise<TemplateRow | undefined> {
  const [row] = await q.query<TemplateRow>(`SELECT ${COLUMNS} FROM templates WHERE template_id = $1`, [templateId]);
  return row;
}
