/**
 * Captures on a VM host: a consistent copy of a VM's persist disk (the guest's filesystem frozen
 * while it is copied, or the disk at rest when the VM is stopped), scrubbed for a public template
 * inside a short-lived microVM of its own, then published as the template's image. The copy is a
 * flattened qcow2, so a capture of a forked VM starts a new, short chain.
 */
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import type { Image } from '../image/build.ts';
import { runQemuImg } from '../vmm/disks.ts';
import { QemuDriver } from '../vmm/qemu.ts';
import { randomBase62 } from '../domain/ids.ts';
import type { ScrubReport } from '../wire/protocol.ts';
import * as templateStore from '../store/templates.ts';
import { recordTemplateOutcome } from '../domain/events.ts';

export interface CapturerOptions {
  db: Db;
  clock: Clock;
  driver: QemuDriver;
  hostId: string;
  templatesDir: string;
  scrubDir: string;
  log: Logger;
  image: () => Image | null;
}

/** Network slots of scrub VMs: the top of the range, apart from tenant VMs. */
const SCRUB_SLOT_BASE = 0x7f00;

export class Capturer {
  private readonly scrubDriver: QemuDriver;
  private readonly inflight = new Set<Promise<void>>();
  private scrubSlot = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: CapturerOptions) {
    // The host's machines without a network at all, resumed from the same snapshots.
    this.scrubDriver = new QemuDriver({ ...o.driver.opts, vmsDir: o.scrubDir, gateway: null });
  }

  /**
   * Runs a capture in the background; its outcome is written on the template row. Captures on a host
   * go one at a time (two freezes of one filesystem cannot overlap, and scrub VMs are CPU-bound).
   */
  start(templateId: string): void {
    const p = this.queue
      .then(() => this.capture(templateId))
      .catch((err) => this.o.log.error({ err, template_id: templateId }, 'capture failed'))
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
    this.queue = p;
  }

  async settled(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  /** Captures that a crash interrupted never become ready: they fail, and their partial files go. */
  async failInterrupted(): Promise<void> {
    const now = this.o.clock.now();
    const failed = await this.o.db.transaction(async (tx) => {
      const ids = await templateStore.failInterruptedOnHost(tx, this.o.hostId, now);
      for (const id of ids) await recordTemplateOutcome(tx, id, now);
      return ids;
    });
    for (const templateId of failed) await rm(path.join(this.o.templatesDir, `${templateId}.qcow2.tmp`), { force: true });
    await rm(this.o.scrubDir, { recursive: true, force: true });
  }

  private async capture(templateId: string): Promise<void> {
    const { db, driver, clock } = this.o;
    const t = await templateStore.getCapturing(db, templateId);
    if (!t) return;
    await mkdir(this.o.templatesDir, { recursive: true });
    const final = path.join(this.o.templatesDir, `${templateId}.qcow2`);
    const tmp = `${final}.tmp`;
    try {
      await this.copyPersist(t.source_vm_id, tmp);
      let report: ScrubReport | null = null;
      if (t.visibility === 'public') report = await this.scrub(tmp);
      await rename(tmp, final);
      const size = (await stat(final)).size;
      await db.transaction(async (tx) => {
        await templateStore.markReady(tx, templateId, { path: final, sizeBytes: size, scrubReport: report }, clock.now());
        await recordTemplateOutcome(tx, templateId, clock.now());
      });
      this.o.log.info({ template_id: templateId, bytes: size, scrubbed: Boolean(report) }, 'template captured');
    } catch (err) {
      await rm(tmp, { force: true });
      await db.transaction(async (tx) => {
        await templateStore.markFailed(tx, templateId, `capture failed: ${(err as Error).message}`.slice(0, 500), clock.now());
        await recordTemplateOutcome(tx, templateId, clock.now());
      });
      throw err;
    }
  }

  /** A flattened copy of the persist disk; a running guest holds its filesystem frozen meanwhile. */
  private async copyPersist(vmId: string, out: string): Promise<void> {
    const { driver } = this.o;
    const source = driver.persistPath(vmId);
    const convert = () => runQemuImg(['convert', '-U', '-O', 'qcow2', source, out]);
    if (!driver.isRunning(vmId)) {
      await convert();
      return;
    }
    await driver.request(vmId, 'freeze', undefined, 30_000);
    try {
      await convert();
    } finally {
      await driver.request(vmId, 'thaw', undefined, 30_000).catch((err) =>
        this.o.log.error({ err, vm_id: vmId }, 'thawing the persist disk after a capture failed'),
      );
    }
  }

  /** Scrubs the copy inside a microVM that has it as its persist disk; answers what went. */
  private async scrub(copy: string): Promise<ScrubReport> {
    const image = this.o.image();
    if (!image) throw new Error('no guest image to scrub with');
    const vmId = `vm_scrub${randomBase62(10)}`;
    const dir = this.scrubDriver.vmDir(vmId);
    await mkdir(dir, { recursive: true });
    await rename(copy, this.scrubDriver.persistPath(vmId));
    const spec = {
      vmId,
      vcpus: 1,
      memoryMib: 512,
      diskGib: 1,
      image,
      netSlot: SCRUB_SLOT_BASE + (this.scrubSlot++ % 0xff),
      hostname: 'agentvm-scrub',
    };
    try {
      await this.scrubDriver.prepareDisks(spec, true);
      await this.scrubDriver.start(spec);
      const report = await this.scrubDriver.request<ScrubReport>(vmId, 'scrub', undefined, 10 * 60_000);
      await this.scrubDriver.stop(vmId);
      // Compact: the clusters the guest discarded are not copied.
      await runQemuImg(['convert', '-O', 'qcow2', this.scrubDriver.persistPath(vmId), copy]);
      return report;
    } finally {
      await this.scrubDriver.destroy(vmId);
    }
  }
}
