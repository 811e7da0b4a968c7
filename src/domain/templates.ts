import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { notFound } from './errors.ts';

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
  scrub_report: unknown;
  created_at: Date;
}

export type TemplateSort = 'trending' | 'new' | 'forks' | 'stars';

export interface TemplateQuery {
  q?: string;
  harness?: string;
  tag?: string;
  sort: TemplateSort;
  limit: number;
  offset: number;
}

const COLUMNS = `template_id, tenant_id, slug, name, description, harness, plan, visibility, tags, forks, stars,
                 size_bytes, status, scrub_report, created_at`;

/**
 * Trending: forks count twice as much as stars, and the score decays with age in hours
 * (score / (age_h + 2)^1.5), so a young template with a few forks passes an old one with many.
 */
const ORDER: Record<TemplateSort, string> = {
  trending: `(forks * 2 + stars) / power(greatest(extract(epoch FROM ($NOW - created_at)) / 3600, 0) + 2, 1.5) DESC, created_at DESC`,
  new: 'created_at DESC',
  forks: 'forks DESC, created_at DESC',
  stars: 'stars DESC, created_at DESC',
};

export class TemplateService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** The caller's own templates merged with the public gallery; the owner also sees capturing and failed ones. */
  async list(tenantId: string, query: TemplateQuery): Promise<{ rows: TemplateRow[]; total: number }> {
    const params: unknown[] = [tenantId];
    const where = [`(tenant_id = $1 OR (visibility = 'public' AND status = 'ready'))`];
    if (query.q) {
      params.push(query.q);
      where.push(`search @@ websearch_to_tsquery('english', $${params.length})`);
    }
    if (query.harness) {
      params.push(query.harness);
      where.push(`harness = $${params.length}`);
    }
    if (query.tag) {
      params.push(query.tag);
      where.push(`$${params.length} = ANY (tags)`);
    }
    const filter = where.join(' AND ');
    const [{ total }] = await this.db.query<{ total: number }>(`SELECT count(*)::int AS total FROM templates WHERE ${filter}`, params);
    let order = ORDER[query.sort];
    if (order.includes('$NOW')) {
      params.push(this.clock.now());
      order = order.replace('$NOW', `$${params.length}::timestamptz`);
    }
    params.push(query.limit, query.offset);
    const rows = await this.db.query<TemplateRow>(
      `SELECT ${COLUMNS} FROM templates WHERE ${filter}
       ORDER BY ${order}, template_id
       LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    return { rows, total };
  }

  /** By `tpl_` id, the caller's own slug, or a public slug, in that order. */
  async get(tenantId: string, idOrSlug: string): Promise<TemplateRow> {
    const [row] = await this.db.query<TemplateRow>(
      `SELECT ${COLUMNS} FROM templates
       WHERE (tenant_id = $1 OR (visibility = 'public' AND status = 'ready'))
         AND (template_id = $2 OR slug = $2)
       ORDER BY (template_id = $2) DESC, (tenant_id IS NOT DISTINCT FROM $1) DESC
       LIMIT 1`,
      [tenantId, idOrSlug],
    );
    if (!row) throw notFound('template');
    return row;
  }
}
