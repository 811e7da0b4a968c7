/**
 * Images of a tenant's own: a root filesystem built from a Dockerfile in a builder VM of the tenant
 * (host/imageBuilder.ts), under the build's own egress policy. Requests are checked and queued here
 * (any replica); a host takes the build, and its log is followed from the database.
 */
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError, invalid, notFound } from './errors.ts';
import { newId } from './ids.ts';
import { slugify } from './templates.ts';
import { checkedEgress } from './vmOrder.ts';
import { DockerfileError, filesOfSource, parseDockerfile, type ImageConfig } from './dockerfile.ts';
import { requireQuota, requireStillWithin } from './limits.ts';
import { lockQuota } from '../store/limits.ts';
import type { EgressPolicy } from './egress.ts';
import type { ImageFeed } from '../feeds/feed.ts';
import * as imageStore from '../store/images.ts';

export type { ImageRow } from '../store/images.ts';

/** The files of one build, decoded, at most this many bytes. */
export const MAX_CONTEXT_BYTES = 16 * 1024 * 1024;
/** A build's default egress: the package registries and GitHub. */
export const BUILD_EGRESS: EgressPolicy = { mode: 'allowlist', allow: ['@debian', '@github', '@npm', '@pypi'] };
/** What VMs of the base image run with: nothing of their own (the platform's user, home and workspace). */
export const BASE_CONFIG: ImageConfig = { env: {}, workdir: '', user: '' };

export interface CreateImageInput {
  name: string;
  dockerfile: string;
  files?: Record<string, string>;
  visibility?: 'public' | 'private';
  egress?: EgressPolicy;
}

export type { ImageFeed } from '../feeds/feed.ts';
/** The feed key that says a build was queued: hosts' builders watch it. */
export const QUEUED = 'queued';

/** One thing a follower of a build sees: a line of its log, then the image as it ended. */
export type BuildEvent = { type: 'log'; seq: number; text: string } | { type: 'end'; image: imageStore.ImageRow };

const POLL_MS = 2000;

/** What is wrong with a build file's path, or null: relative, no `..`, no empty part. */
function filePathProblem(p: string): string | null {
  if (p.length === 0 || p.length > 4096) return 'must be a relative path of 1 to 4096 characters';
  if (p.startsWith('/')) return 'must be relative to the build';
  if (p.split('/').some((part) => part === '..' || part === '')) return 'may not hold ".." or an empty part';
  if (p.includes('\0')) return 'may not hold a NUL character';
  return null;
}

/** The build's files checked and decoded; throws invalid naming the file. */
export function checkedFiles(files: Record<string, string>): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let total = 0;
  for (const [p, b64] of Object.entries(files)) {
    const problem = filePathProblem(p);
    if (problem) throw invalid(`files["${p.slice(0, 80)}"]`, problem);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) throw invalid(`files["${p.slice(0, 80)}"]`, 'must be base64');
    const bytes = Buffer.from(b64, 'base64');
    total += bytes.length;
    if (total > MAX_CONTEXT_BYTES) throw new DomainError('payload_too_large', `files: more than ${MAX_CONTEXT_BYTES / 1024 / 1024} MiB in all`, 'copy large inputs in a RUN step from a host the build may reach');
    out.set(p, bytes);
  }
  return out;
}

export class ImageService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly feed: ImageFeed,
    /** Wakes this process's image builder, where it has one. */
    private readonly onQueued: () => void = () => undefined,
  ) {}

  /** Checks the request, counts it against the quota and queues the build: 202 with the queued image. */
  async create(tenantId: string, input: CreateImageInput): Promise<imageStore.ImageRow> {
    const name = input.name.trim();
    if (name.length === 0 || name.length > 100) throw invalid('name', 'must be 1 to 100 characters');
    let parsed;
    try {
      parsed = parseDockerfile(input.dockerfile);
    } catch (err) {
      if (err instanceof DockerfileError) throw invalid('dockerfile', err.message);
      throw err;
    }
    const files = checkedFiles(input.files ?? {});
    for (const step of parsed.steps) {
      if (step.kind !== 'copy') continue;
      for (const source of step.sources) {
        if (filesOfSource(source, files.keys()).length === 0) throw invalid('dockerfile', `line ${step.line}: ${source} is not among the build's files`);
      }
    }
    const egress = checkedEgress(input.egress) ?? BUILD_EGRESS;
    const now = this.clock.now();
    const row = await this.db.transaction(async (tx) => {
      if (parsed.from !== 'base') {
        const parent = await imageStore.getVisible(tx, tenantId, parsed.from);
        if (!parent) throw invalid('dockerfile', `FROM ${parsed.from}: no image of that id or name that you may use ("base", or one of your images or a public one)`);
        if (parent.status !== 'ready') throw invalid('dockerfile', `FROM ${parsed.from}: that image is ${parent.status}, not ready`);
        parsed.from = parent.image_id;
      }
      await requireQuota(tx, tenantId, { images: 1 }, now);
      return imageStore.insertQueued(tx, {
        image_id: newId('img'),
        tenant_id: tenantId,
        name,
        slug: await this.slugFor(tx, tenantId, name),
        visibility: input.visibility ?? 'private',
        parent: parsed.from,
        dockerfile: input.dockerfile,
        context: input.files ?? {},
        egress,
        created_at: now,
      });
    });
    this.onQueued();
    await this.feed.publish({ image_id: QUEUED }).catch(() => undefined);
    return row;
  }

  /** A rebuild keeps its name's slug; a new name takes a slug no other tenant's image has. */
  private async slugFor(q: Queryable, tenantId: string, name: string): Promise<string> {
    const earlier = await imageStore.slugOfName(q, tenantId, name);
    if (earlier) return earlier;
    const base = slugify(name) === 'template' ? 'image' : slugify(name);
    if (base === 'base') return this.slugFor(q, tenantId, `${name}-image`);
    const taken = await imageStore.slugsOfOthers(q, tenantId, base);
    for (let i = 1; ; i++) {
      const slug = i === 1 ? base : `${base}-${i}`;
      if (!taken.has(slug)) return slug;
    }
  }

  /** The caller's images merged with the public ones (the gallery's: `visibility: public`), searched and sorted as templates are. */
  async list(
    tenantId: string,
    o: { limit: number; offset: number; q?: string; sort?: imageStore.ImageSort; visibility?: 'public' | 'private' },
  ): Promise<{ rows: imageStore.ImageRow[]; total: number }> {
    const filter = { search: o.q, visibility: o.visibility };
    const [rows, total] = await Promise.all([
      imageStore.listVisible(this.db, tenantId, { ...filter, limit: o.limit, offset: o.offset, sort: o.sort }),
      imageStore.countVisible(this.db, tenantId, filter),
    ]);
    return { rows, total };
  }

  async get(tenantId: string, idOrSlug: string, q: Queryable = this.db): Promise<imageStore.ImageRow> {
    const row = await imageStore.getVisible(q, tenantId, idOrSlug);
    if (!row) throw notFound('image');
    return row;
  }

  /** The image a new VM's root starts from: ready, and the caller may use it. Null for base. */
  async forVm(q: Queryable, tenantId: string, idOrSlug: string | undefined, field = 'image'): Promise<Pick<imageStore.ImageRow, 'image_id' | 'status' | 'host_id'> | null> {
    if (idOrSlug === undefined || idOrSlug === 'base') return null;
    const row = await imageStore.getVisibleForVm(q, tenantId, idOrSlug);
    if (!row) throw invalid(field, `no image "${idOrSlug.slice(0, 80)}" that you may use`);
    if (row.status !== 'ready') throw invalid(field, `image ${row.image_id} is ${row.status}, not ready`);
    return row;
  }

  /** A VM's root moves to the newest ready build of its image's name (a reprovision). */
  async moveToNewest(tx: Queryable, tenantId: string, vmId: string, imageId: string): Promise<void> {
    const current = await imageStore.byId(tx, imageId);
    if (!current) return;
    const newest = await imageStore.getVisible(tx, tenantId, current.slug);
    if (newest && newest.image_id !== imageId) await imageStore.setVmImage(tx, vmId, newest.image_id);
  }

  /** Deletes one of the caller's images; 409 image_in_use while a VM or another image uses it. */
  async delete(tenantId: string, imageId: string): Promise<imageStore.ImageRow> {
    const row = await this.db.transaction(async (tx) => {
      const image = await imageStore.getVisible(tx, tenantId, imageId);
      if (!image || image.tenant_id !== tenantId) throw notFound('image');
      const users = await imageStore.users(tx, image.image_id);
      if (users.vms > 0 || users.images > 0) {
        const what = [users.vms ? `${users.vms} VM${users.vms > 1 ? 's' : ''}` : '', users.images ? `${users.images} image${users.images > 1 ? 's' : ''}` : ''].filter(Boolean).join(' and ');
        throw new DomainError('image_in_use', `image ${image.image_id} is used by ${what}`, 'destroy those VMs and delete those images first');
      }
      return (await imageStore.markDeleted(tx, tenantId, image.image_id, this.clock.now()))!;
    });
    await this.feed.publish({ image_id: row.image_id }).catch(() => undefined);
    return row;
  }

  /** Where a follower of a build starts: after `lastEventId`, which the build must have reached. */
  async beginFollowing(tenantId: string, imageId: string, lastEventId: string | undefined): Promise<{ image: imageStore.ImageRow; after: number }> {
    const image = await this.get(tenantId, imageId);
    if (lastEventId === undefined) return { image, after: 0 };
    if (!/^\d{1,10}$/.test(lastEventId.trim())) throw invalid('Last-Event-ID', 'must be the id of an event of this build (a whole number)');
    const after = Number(lastEventId.trim());
    if (after > image.last_seq) throw invalid('Last-Event-ID', `is ahead of the build: its last line so far is ${after}`);
    return { image, after };
  }

  /** Sends each log line after `after` as it is stored, then the image as it ended. */
  async follow(imageId: string, after: number, send: (e: BuildEvent) => void, signal: AbortSignal): Promise<void> {
    let seen = after;
    for (;;) {
      const ended = await this.feed.until(
        imageId,
        async () => {
          const lines = await imageStore.logAfter(this.db, imageId, seen);
          for (const l of lines) {
            send({ type: 'log', seq: l.seq, text: l.text });
            seen = l.seq;
          }
          const image = await imageStore.byId(this.db, imageId);
          const over = !image || ((image.status === 'ready' || image.status === 'failed') && image.last_seq <= seen) || lines.length === 500;
          return { over, value: image };
        },
        { ms: 60_000, pollMs: POLL_MS, signal },
      );
      if (signal.aborted || !ended) return;
      if ((ended.status === 'ready' || ended.status === 'failed') && ended.last_seq <= seen) return send({ type: 'end', image: ended });
    }
  }
}

/**
 * A build's image made ready (its host's last step), kept only while its tenant stays within
 * `disk_gib` with its layers counted: their size is known only now (section 14; over it,
 * `quota_exceeded`, and the caller fails the build with that reason). False when another host took
 * the build over meanwhile.
 */
export async function markBuiltReady(db: Db, tenantId: string, imageId: string, r: Parameters<typeof imageStore.markReady>[2], now: Date, hostId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    await lockQuota(tx, tenantId);
    if (!(await imageStore.markReady(tx, imageId, r, now, hostId))) return false;
    await requireStillWithin(tx, tenantId, 'disk_gib', Math.ceil(r.sizeBytes / 1024 ** 3), now);
    return true;
  });
}
