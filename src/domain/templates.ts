import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError, notFound } from './errors.ts';
import { newId } from './ids.ts';
import * as templateStore from '../store/templates.ts';
import * as vmStore from '../store/vms.ts';
import type { TemplateQuery, TemplateRow } from '../store/templates.ts';
import { requireQuota } from './limits.ts';
import { lockQuota } from '../store/limits.ts';

export type { TemplateRow } from '../store/templates.ts';

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
      // The quota lock before the VM's row, in the order a create takes them.
      await lockQuota(tx, tenantId);
      const vm = await vmStore.lockForCapture(tx, tenantId, vmId);
      if (!vm) throw notFound('VM');
      if (vm.status !== 'running' && vm.status !== 'stopped') {
        throw new DomainError('vm_not_running', `the VM is ${vm.status}; a capture needs it running or stopped`, 'wait until it is running or stopped');
      }
      if (!capturer) throw new DomainError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });
      // A template counts one, and its disk image the source VM's persist disk.
      await requireQuota(tx, tenantId, { templates: 1, disk_gib: vm.disk_gib }, this.clock.now());
      const visibility = input.visibility ?? 'private';
      const name = input.name ?? `${vm.harness} workspace from ${vm.vm_id}`;
      const base = slugify(name);
      // Unique per owner, and among public templates for a public one.
      const taken = await templateStore.slugsTaken(tx, tenantId, visibility === 'public', base);
      let slug = base;
      for (let n = 2; taken.has(slug); n++) slug = `${base.slice(0, 55)}-${n}`;
      return templateStore.insertCapturing(tx, {
        template_id: newId('tpl'),
        tenant_id: tenantId,
        slug,
        name,
        harness: vm.harness,
        plan: vm.plan,
        visibility,
        tags: [vm.harness],
        source_vm_id: vm.vm_id,
        created_at: this.clock.now(),
      });
    });
    capturer!(row.template_id);
    return row;
  }

  /**
   * The caller's own templates (any status) merged with the rest of the public gallery (ready ones):
   * two sets read apart so that each has its index, merged in the sort order.
   */
  async list(tenantId: string, query: TemplateQuery): Promise<{ rows: TemplateRow[]; total: number }> {
    const total = await this.countTotal(`${tenantId}\0${query.q ?? ''}\0${query.harness ?? ''}\0${query.tag ?? ''}`, () =>
      templateStore.countListed(this.db, tenantId, query),
    );
    const rows = await templateStore.listPage(this.db, tenantId, query);
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
    const row = await templateStore.getVisible(q, tenantId, idOrSlug);
    if (!row) throw notFound('template');
    return row;
  }
}
