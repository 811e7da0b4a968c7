import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError, invalid, notFound } from './errors.ts';
import { PLANS, TIERS, planPriceCents, type PlanId, type TierId } from './plans.ts';
import type { Queryable } from '../store/db.ts';
import type { HostService } from './hosts.ts';
import type { TemplateService } from './templates.ts';
import { onceForKey, requestHash, type StoredResponse } from './idempotency.ts';
import { meterVm } from './metering.ts';
import * as metricsStore from '../store/metrics.ts';
import type { BillingService } from './billing.ts';
import { applyLifecycle, canSuspend, type LifecycleAction, isResting, type WaitTarget } from './vmState.ts';
import * as vmStore from '../store/vms.ts';
import * as ledgerStore from '../store/ledger.ts';
import * as previewStore from '../store/previews.ts';
import * as hostStore from '../store/hosts.ts';
import * as templateStore from '../store/templates.ts';
import * as egressStore from '../store/egress.ts';
import type { VmRow } from '../store/vms.ts';
import type { EgressPolicy } from './egress.ts';
import { recordCreditsLow, recordVmChange, withMonthCosts } from './events.ts';
import type { VmFeed } from '../feeds/feed.ts';
import { lifecycleCharge, orderCharge, requireQuota, vmCompute } from './limits.ts';
import { lockQuota } from '../store/limits.ts';
import type { ImageService } from './images.ts';

export type { VmRow } from '../store/vms.ts';
import { checkedEgress, checkedTimers, resolveOrder, type CreateVmInput, type VmOrder, type VmTimersInput } from './vmOrder.ts';
import { placeVms, type PlacedImage, type SnapshotStart } from './vmPlacement.ts';

export interface ForkResult {
  vm_id: string;
  status: 'provisioning';
  /** Null for a plan VM, which every fork is today. */
  tier: TierId | null;
  template_id: string;
}

export interface CreateVmResult {
  vm_id: string;
  status: 'provisioning';
  /** Present for a tier VM only. */
  tier?: TierId;
  vm_ids?: string[];
}

export interface VmServiceOptions {
  /** Called after every change a reconciler should act on (the local one wakes at once). */
  onChange?: () => void;
  /**
   * On API replicas: a VM whose host has stopped heartbeating shows `host_unavailable` in its
   * status_reason (its status is what it was; it is not metered meanwhile, and shows as before once
   * its host is back). One process with its own host never needs it.
   */
  showLostHosts?: boolean;
  /** Word of the VMs a request changed, for whoever waits for their status (waitFor). */
  feed: VmFeed;
  /** Resolves the image a new VM's root starts from. */
  images?: ImageService;
}

export type { WaitTarget };
/**
 * A wait is over when the VM has the status waited for, or rests in another one that nothing in
 * flight leads out of: `failed`, or a resting status while its desired state is not the target (a
 * suspend that failed and left the VM running, a stop asked for while waiting for running).
 */
export function waitIsOver(vm: { status: string; desired_state: string }, target: WaitTarget): boolean {
  return vm.status === target || vm.status === 'failed' || (isResting(vm.status) && vm.desired_state !== target);
}
/** A wait hears of its VM's changes at once; it also looks this often (news lost with a connection). */
const WAIT_POLL_MS = 1000;

/** The status_reason of a VM whose host is lost (not heartbeating). */
export const HOST_UNAVAILABLE = 'host_unavailable';

export class VmService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly billing: BillingService,
    private readonly hosts: HostService,
    private readonly templates: TemplateService,
    private readonly opts: VmServiceOptions,
  ) {}

  /** Replaces a VM's egress policy; the gateway applies it to the VM's next connection, running or not. */
  async setEgress(tenantId: string, vmId: string, policy: EgressPolicy): Promise<VmRow> {
    const checked = checkedEgress(policy)!;
    const row = await vmStore.setEgress(this.db, tenantId, vmId, checked, this.clock.now());
    if (!row) throw notFound('VM');
    return (await this.decorate(tenantId, [row]))[0];
  }

  /** The VM's gateway connections, newest first. */
  async egressLog(tenantId: string, vmId: string, limit: number): Promise<{ data: egressStore.EgressLogEntry[]; has_more: boolean }> {
    await this.get(tenantId, vmId);
    return egressStore.listLog(this.db, vmId, limit);
  }

  /**
   * The VM's latest resource sample with its size: the last one taken, even when the VM has stopped
   * since (`sampled_at` says when). None yet: 409 vm_not_running for a VM that is not running, 503
   * unavailable for one that has just started (its host samples every 5 s).
   */
  async metrics(tenantId: string, vmId: string): Promise<{ vm: VmRow; sample: metricsStore.VmSample }> {
    const vm = await this.get(tenantId, vmId);
    const sample = await metricsStore.latest(this.db, vmId);
    if (sample) return { vm, sample };
    if (vm.status !== 'running') {
      throw new DomainError('vm_not_running', `VM ${vmId} is ${vm.status} and has never been sampled`, 'start the VM; it is sampled every few seconds while it runs');
    }
    throw new DomainError('unavailable', `VM ${vmId} has not been sampled yet`, 'retry in 10 seconds', { 'Retry-After': '10' });
  }

  /** After a commit that made or changed these VMs elsewhere (a branch): as onChange. */
  changed(vmIds: string[]): Promise<void> {
    return this.onChange(vmIds);
  }

  /** After a commit that changed these VMs: their reconciler acts, and their waits look again. */
  private async onChange(vmIds: string[]): Promise<void> {
    this.opts.onChange?.();
    // Awaited: nothing of a request is left running once it is answered (a database closing after it).
    for (const vmId of vmIds) await this.opts.feed.publish({ vm_id: vmId }).catch(() => undefined);
  }

  /**
   * The VM once its wait is over (waitIsOver), or as it is after `ms` or when `signal` aborts (the
   * client went away). A VM that is gone, or goes while waited for, is 404.
   */
  async waitFor(tenantId: string, vmId: string, target: WaitTarget, ms: number, signal?: AbortSignal): Promise<VmRow> {
    const look = async () => {
      const state = await vmStore.stateForTenant(this.db, tenantId, vmId);
      if (!state) throw notFound('VM');
      return { over: waitIsOver(state, target), value: undefined };
    };
    await this.opts.feed.until(vmId, look, { ms, pollMs: WAIT_POLL_MS, signal });
    return this.get(tenantId, vmId);
  }

  async list(tenantId: string): Promise<VmRow[]> {
    return this.decorate(tenantId, await vmStore.listForTenant(this.db, tenantId));
  }

  async get(tenantId: string, vmId: string): Promise<VmRow> {
    const vm = await vmStore.getForTenant(this.db, tenantId, vmId);
    if (!vm) throw notFound('VM');
    return (await this.decorate(tenantId, [vm]))[0];
  }

  /** The tenant's VM by its id, or by its preview label (`vm-…`: lowercase, no `_`; section 16). */
  async getByIdOrLabel(tenantId: string, idOrLabel: string): Promise<VmRow> {
    if (idOrLabel.includes('_') || !/^[a-z0-9][a-z0-9-]*$/.test(idOrLabel)) return this.get(tenantId, idOrLabel);
    const found = await vmStore.byLabel(this.db, idOrLabel, tenantId);
    if (!found) throw notFound('VM');
    return this.get(tenantId, found.vm_id);
  }

  /** What a VM shows beyond its row: its cost this month, and a lost host. */
  private async decorate(tenantId: string, rows: VmRow[]): Promise<VmRow[]> {
    await withMonthCosts(this.db, tenantId, rows, this.clock.now());
    return this.markLostHosts(rows);
  }

  /**
   * Changes idle stop and expiry (PATCH): a field left out keeps its value, null clears it. The idle
   * clock starts again when `auto_stop_after_s` is set.
   */
  async updateTimers(tenantId: string, vmId: string, input: VmTimersInput): Promise<VmRow> {
    const now = this.clock.now();
    if (input.auto_resume !== undefined && !(await previewStore.setAutoResume(this.db, tenantId, vmId, input.auto_resume))) throw notFound('VM');
    const row = await vmStore.setTimers(this.db, tenantId, vmId, checkedTimers(input, now), now);
    if (!row) throw notFound('VM');
    return (await this.decorate(tenantId, [row]))[0];
  }

  private async markLostHosts(rows: VmRow[]): Promise<VmRow[]> {
    if (!this.opts.showLostHosts || rows.length === 0) return rows;
    const lost = new Set(await hostStore.listLost(this.db, new Date(Date.now() - this.hosts.staleMs)));
    for (const vm of rows) {
      if (vm.host_id && lost.has(vm.host_id) && vm.status !== 'stopped' && vm.status !== 'failed') vm.status_reason = HOST_UNAVAILABLE;
    }
    return rows;
  }

  /**
   * Accepts a create in one transaction: the Idempotency-Key claim, the money check, placement on a
   * host with room (preempting spot VMs for a non-spot VM if that makes room), the VM rows with
   * desired state running, and the card charge last. A reconciler on the chosen host boots them.
   */
  async create(tenantId: string, input: CreateVmInput, idempotencyKey?: string): Promise<StoredResponse<CreateVmResult>> {
    const order = resolveOrder(input, this.clock.now());
    const result = await this.db.transaction((tx) =>
      onceForKey(tx, tenantId, idempotencyKey, 'createVM', requestHash('createVM', '', input), async () => {
        await requireQuota(tx, tenantId, orderCharge(order), this.clock.now());
        if (order.tier) {
          await this.billing.requireCredits(tx, tenantId, TIERS[order.tier].cents_per_hour * order.count);
        } else {
          await this.billing.requireCard(tx, tenantId);
        }
        const image = await this.opts.images?.forVm(tx, tenantId, input.image);
        const ids = await this.insertVms(tx, tenantId, order, null, image ?? null);
        if (order.plan && order.cycle) {
          for (const vmId of ids) {
            await this.billing.chargeCard(tx, tenantId, planPriceCents(order.plan, order.cycle), {
              description: `${order.plan} plan VM (${order.cycle})`,
              vmId,
              plan: order.plan,
              cycle: order.cycle,
            });
          }
        }
        for (const vmId of ids) await recordVmChange(tx, null, vmId, this.clock.now());
        const body: CreateVmResult = { vm_id: ids[0], status: 'provisioning' };
        if (order.tier) body.tier = order.tier;
        if (order.count > 1) body.vm_ids = ids;
        return { status: 201, body };
      }),
    );
    await this.onChange(result.body.vm_ids ?? [result.body.vm_id]);
    return result;
  }

  /**
   * Forks a template into a new VM: charged like a create (card, Idempotency-Key), its persist disk a
   * copy-on-write child of the template's image. Counts the fork.
   */
  async fork(tenantId: string, idOrSlug: string, input: { plan?: PlanId; egress?: EgressPolicy; image?: string } & VmTimersInput, idempotencyKey?: string): Promise<StoredResponse<ForkResult>> {
    const result = await this.db.transaction((tx) =>
      onceForKey(tx, tenantId, idempotencyKey, 'forkTemplate', requestHash('forkTemplate', idOrSlug, input), async () => {
        const template = await this.templates.get(tenantId, idOrSlug, tx);
        if (template.status === 'capturing') {
          throw new DomainError('unavailable', 'the template is still being captured', 'try again in a little while', { 'Retry-After': '10' });
        }
        if (template.status !== 'ready') throw invalid('id', 'the capture of this template failed, so it cannot be forked');
        const plan = input.plan ?? (template.plan as PlanId | null) ?? 'starter';
        // The fork's persist disk starts as the template's: it cannot be smaller than that filesystem.
        const templateDisk = template.plan ? PLANS[template.plan as PlanId].disk_gib : PLANS.starter.disk_gib;
        if (PLANS[plan].disk_gib < templateDisk) {
          throw invalid('plan', `this template's disk is ${templateDisk} GiB and a ${plan} VM's is ${PLANS[plan].disk_gib} GiB: fork it as ${template.plan} or larger`);
        }
        const order = resolveOrder({ plan, harness: template.harness, egress: input.egress, auto_stop_after_s: input.auto_stop_after_s, expires_at: input.expires_at }, this.clock.now());
        await requireQuota(tx, tenantId, orderCharge(order), this.clock.now());
        await this.billing.requireCard(tx, tenantId);
        const image = await this.opts.images?.forVm(tx, tenantId, input.image);
        const [vmId] = await this.insertVms(tx, tenantId, order, template.template_id, image ?? null);
        await this.billing.chargeCard(tx, tenantId, planPriceCents(plan, 'monthly'), {
          description: `${plan} plan VM (monthly), fork of ${template.slug}`,
          vmId,
          templateId: template.template_id,
          plan,
          cycle: 'monthly',
        });
        await templateStore.countFork(tx, template.template_id);
        await recordVmChange(tx, null, vmId, this.clock.now());
        return { status: 201, body: { vm_id: vmId, status: 'provisioning' as const, tier: order.tier, template_id: template.template_id } };
      }),
    );
    await this.onChange([result.body.vm_id]);
    return result;
  }

  /**
   * Places and inserts `order.count` VMs (vmPlacement.ts); answers their ids. VMs of an image go to
   * the host that holds its layers; VMs started from a snapshot come `from` it.
   */
  insertVms(tx: Queryable, tenantId: string, order: VmOrder, templateId: string | null, image: PlacedImage | null = null, from: SnapshotStart | null = null): Promise<string[]> {
    return placeVms(tx, this.hosts, this.clock, tenantId, order, templateId, image, from);
  }

  /** Whether `hostId` has room for the order's VMs now: a check before work placement would refuse after (a branch's pause). */
  async roomOn(tx: Queryable, order: VmOrder, hostId: string): Promise<boolean> {
    return (await this.hosts.place(tx, { vcpus: order.vcpus, memory_mib: order.memory_mib, disk_gib: order.disk_gib }, order.count, order.tier !== 'spot', hostId)) !== null;
  }

  /**
   * Destroys a VM: metering ends now (the last part-cent is drawn), the row disappears from the API at
   * once, and its host removes the disks.
   */
  async destroy(tenantId: string, vmId: string): Promise<VmRow> {
    const row = await this.db.transaction(async (tx) => {
      // The tenant before the VM: the final draw takes the tenant's money lock, which a metering step
      // holds while it stops the tenant's other tier VMs (this one among them).
      await ledgerStore.lockTenant(tx, tenantId);
      const vm = await vmStore.lockForTenant(tx, tenantId, vmId);
      if (!vm) throw notFound('VM');
      return this.destroyLocked(tx, vm, null);
    });
    await this.onChange([vmId]);
    return (await withMonthCosts(this.db, tenantId, [row], this.clock.now()))[0];
  }

  /**
   * Stops the running VMs idle for their `auto_stop_after_s` (status_reason `idle`); their hosts stop
   * them and report vm.stopped. One conditional UPDATE: each VM is stopped once, whoever runs it.
   */
  async stopIdle(): Promise<string[]> {
    const stopped = await vmStore.stopIdle(this.db, this.clock.now());
    if (stopped.length) await this.onChange(stopped.map((v) => v.vm_id));
    return stopped.map((v) => v.vm_id);
  }

  /**
   * Destroys the VMs whose expiry has come (status_reason `expired`): final metering, disks removed by
   * their host. Each is claimed with SKIP LOCKED, so whichever process looks first destroys it, once.
   * Answers the VMs destroyed.
   */
  /** When the next VM expires (null: none has an expiry). */
  nextExpiry(): Promise<Date | null> {
    return vmStore.nextExpiry(this.db);
  }

  async destroyExpired(limit = 100): Promise<string[]> {
    const now = this.clock.now();
    const destroyed: string[] = [];
    for (const { vm_id: vmId, tenant_id } of await vmStore.listExpired(this.db, now, limit)) {
      const done = await this.db.transaction(async (tx) => {
        await ledgerStore.lockTenant(tx, tenant_id);
        const vm = await vmStore.lockExpired(tx, vmId, now);
        if (!vm) return false;
        await this.destroyLocked(tx, vm, 'expired');
        return true;
      });
      if (done) destroyed.push(vmId);
    }
    if (destroyed.length) await this.onChange(destroyed);
    return destroyed;
  }

  /** Ends metering (the last part-cent drawn), forgets brokered secrets, marks the VM deleted and reports it. */
  private async destroyLocked(tx: Queryable, vm: vmStore.VmRecord, reason: string | null): Promise<VmRow> {
    const now = this.clock.now();
    const metered = await meterVm(tx, this.billing, vm, now, { running: false, final: true });
    await egressStore.removeBrokered(tx, vm.vm_id);
    const row = await vmStore.markDeleted(tx, vm.vm_id, now, reason);
    await recordVmChange(tx, vm, vm.vm_id, now);
    if (metered.drawn > 0) {
      const balance = await this.billing.creditBalance(tx, vm.tenant_id);
      await recordCreditsLow(tx, vm.tenant_id, balance + metered.drawn, balance, now);
    }
    return row;
  }

  /** Records a lifecycle request for the reconciler; answers the VM as it now stands. */
  async lifecycle(tenantId: string, vmId: string, action: LifecycleAction): Promise<VmRow> {
    const row = await this.db.transaction(async (tx) => {
      // A start, restart or reprovision may raise running_vms, vcpus and memory_mib: the quota lock
      // comes before the VM's row, in the order a create takes them.
      const mayRaise = action !== 'stop' && action !== 'suspend';
      if (mayRaise) await lockQuota(tx, tenantId);
      const vm = await vmStore.lockForTenant(tx, tenantId, vmId);
      if (!vm) throw notFound('VM');
      if (action === 'suspend' && !canSuspend(vm)) {
        throw new DomainError('vm_not_running', `VM ${vmId} is ${vm.status}: only a running VM can be suspended`, vm.status === 'stopped' || vm.status === 'failed' ? 'start it first' : 'wait until it is running');
      }
      const patch = applyLifecycle(vm, action);
      if (!patch) return vm;
      // A reprovision moves the VM to the newest ready build of its image's name.
      if (action === 'reprovision' && vm.root_image_id && this.opts.images) await this.opts.images.moveToNewest(tx, tenantId, vm.vm_id, vm.root_image_id);
      if (mayRaise) {
        const after = { ...vm, status: patch.status ?? vm.status, desired_state: patch.desired_state ?? vm.desired_state };
        await requireQuota(tx, tenantId, lifecycleCharge(vmCompute(vm), vmCompute(after)), this.clock.now());
      }
      const updated = await vmStore.recordLifecycle(
        tx,
        tenantId,
        vmId,
        {
          status: patch.status ?? vm.status,
          status_reason: patch.status_reason ?? null,
          desired_state: patch.desired_state ?? vm.desired_state,
          restart_requested: patch.restart_requested ?? vm.restart_requested,
          reprovision_requested: patch.reprovision_requested ?? vm.reprovision_requested,
        },
        this.clock.now(),
      );
      await recordVmChange(tx, vm, vmId, this.clock.now());
      return updated;
    });
    await this.onChange([vmId]);
    return (await this.decorate(tenantId, [row]))[0];
  }
}
