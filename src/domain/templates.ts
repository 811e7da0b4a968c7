import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { ApiError, notFound } from './errors.ts';
import { newId } from './ids.ts';
import type { ScrubReport } from '../guest/scrub.ts';

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

/** Lowercase `[a-z0-9-]` from a name, at most 60 characters. */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
  return slug || 'template';
}

export class TemplateService {
  /**
   * `capturer` makes the template's disk image (copy, scrub when public) in the background on the
   * source VM's host; null where no VM host is attached.
   */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly capturer: ((templateId: string) => void) | null = null,
  ) {}

  /**
   * Starts a capture of a VM's persist disk: a template row in status `capturing`, then the host
   * copies (and for a public capture scrubs) the disk. The VM must be running or stopped.
   */
  async capture(tenantId: string, vmId: string, input: { visibility?: 'public' | 'private'; name?: string }): Promise<TemplateRow> {
    const capturer = this.capturer;
    const row = await this.db.transaction(async (tx) => {
      const [vm] = await tx.query<{ vm_id: string; status: string; harness: string; plan: string | null }>(
        'SELECT vm_id, status, harness, plan FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL FOR UPDATE',
        [tenantId, vmId],
      );
      if (!vm) throw notFound('VM');
      if (vm.status !== 'running' && vm.status !== 'stopped') {
        throw new ApiError('vm_not_running', `the VM is ${vm.status}; a capture needs it running or stopped`, 'wait until it is running or stopped');
      }
      if (!capturer) throw new ApiError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });
      const visibility = input.visibility ?? 'private';
      const name = input.name ?? `${vm.harness} workspace from ${vm.vm_id}`;
      const base = slugify(name);
      // Unique per owner, and among public templates for a public one.
      const taken = new Set(
        (
          await tx.query<{ slug: string }>(
            `SELECT slug FROM templates WHERE (tenant_id = $1 OR ($2 AND visibility = 'public')) AND slug LIKE $3`,
            [tenantId, visibility === 'public', `${base}%`],
          )
        ).map((r) => r.slug),
      );
      let slug = base;
      for (let n = 2; taken.has(slug); n++) slug = `${base.slice(0, 55)}-${n}`;
      const [inserted] = await tx.query<TemplateRow>(
        `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, plan, visibility, tags, status, source_vm_id, created_at)
         VALUES ($1, $2, $3, $4, '', $5, $6, $7, $8, 'capturing', $9, $10) RETURNING ${COLUMNS}`,
        [newId('tpl'), tenantId, slug, name, vm.harness, vm.plan, visibility, [vm.harness], vm.vm_id, this.clock.now()],
      );
      return inserted;
    });
    capturer!(row.template_id);
    return row;
  }

  /**
   * The caller's own templates (any status) merged with the rest of the public gallery (ready ones):
   * two sets read apart so that each has its index, merged in the sort order.
   */
  async list(tenantId: string, query: TemplateQuery): Promise<{ rows: TemplateRow[]; total: number }> {
    const params: unknown[] = [tenantId];
    const where: string[] = [];
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
    const filter = where.map((w) => ` AND ${w}`).join('');
    const own = `FROM templates WHERE tenant_id = $1${filter}`;
    const gallery = `FROM templates WHERE visibility = 'public' AND status = 'ready' AND tenant_id IS DISTINCT FROM $1${filter}`;
    const total = await this.countTotal(`${tenantId}\0${query.q ?? ''}\0${query.harness ?? ''}\0${query.tag ?? ''}`, () =>
      this.db.query<{ total: number }>(`SELECT ((SELECT count(*) ${own}) + (SELECT count(*) ${gallery}))::int AS total`, params).then((r) => r[0].total),
    );
    // Each set sorted and cut on its own (an index scan for the gallery's), then merged.
    const order = `${ORDER[query.sort]}, template_id`;
    params.push(query.limit + query.offset, query.limit, query.offset);
    const [upto, limit, offset] = [params.length - 2, params.length - 1, params.length];
    const rows = await this.db.query<TemplateRow>(
      `SELECT ${COLUMNS} FROM ((SELECT ${COLUMNS}, hot ${own} ORDER BY ${order} LIMIT $${upto})
                              UNION ALL (SELECT ${COLUMNS}, hot ${gallery} ORDER BY ${order} LIMIT $${upto})) t
       ORDER BY ${order} LIMIT $${limit} OFFSET $${offset}`,
      params,
    );
    return { rows, total };
  }

  private readonly totals = new Map<string, { total: number; until: number }>();

  /**
   * A list's total. Counting a large gallery costs tens of milliseconds a request, so a total of
   * 1,000 or more is kept for two seconds (a page of a big result set); smaller ones are always counted.
   */
  private async countTotal(key: string, count: () => Promise<number>): Promise<number> {
    const now = Date.now();
    const hit = this.totals.get(key);
    if (hit && hit.until > now) return hit.total;
    const total = await count();
    if (total >= 1000) {
      if (this.totals.size >= 1000) this.totals.clear();
      this.totals.set(key, { total, until: now + 2000 });
    }
    return total;
  }

  /** By `tpl_` id, the caller's own slug, or a public slug, in that order. */
  async get(tenantId: string, idOrSlug: string, q: Queryable = this.db): Promise<TemplateRow> {
    const [row] = await q.query<TemplateRow>(
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
