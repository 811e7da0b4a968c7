import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { ApiError, invalid, notFound } from './errors.ts';
import { getHarness, DEFAULT_HARNESS } from '../harness/catalogue.ts';
import { PLANS, TIERS, type Cycle, type PlanId, type TierId } from './plans.ts';
import type { BillingService } from './billing.ts';
import { applyLifecycle, type LifecycleAction, type VmStateFields } from './vmState.ts';

export interface VmRow extends VmStateFields {
  vm_id: string;
  tenant_id: string;
  host_id: string | null;
  plan: PlanId | null;
  cycle: Cycle | null;
  tier: TierId | null;
  harness: string;
  template_id: string | null;
  ipv4: string | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  secret_names: string[];
  created_at: Date;
  updated_at: Date;
}

export interface CreateVmInput {
  plan?: PlanId;
  cycle?: Cycle;
  tier?: TierId;
  harness?: string;
  count?: number;
}

/** A create request resolved against the catalogue: what will be charged and how big each VM is. */
export interface VmOrder {
  plan: PlanId | null;
  cycle: Cycle | null;
  tier: TierId | null;
  harness: string;
  count: number;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
}

const RETRY_AFTER_SECONDS = '30';

export function resolveOrder(input: CreateVmInput): VmOrder {
  const count = input.count ?? 1;
  if (input.plan && input.tier) throw invalid('tier', 'give either a plan or a tier, not both');
  if (input.cycle && input.tier) throw invalid('cycle', 'a billing cycle belongs to a flat plan, not to a tier');
  if (count > 1 && input.tier !== 'spot') throw invalid('count', 'more than one VM at once (a swarm) needs tier "spot"');
  const harness = input.harness ?? DEFAULT_HARNESS;
  if (!getHarness(harness)) throw invalid('harness', `unknown harness "${harness}"`);
  if (input.tier) {
    const { vcpus, memory_mib, disk_gib } = TIERS[input.tier];
    return { plan: null, cycle: null, tier: input.tier, harness, count, vcpus, memory_mib, disk_gib };
  }
  const plan = input.plan ?? 'starter';
  const { vcpus, memory_mib, disk_gib } = PLANS[plan];
  return { plan, cycle: input.cycle ?? 'monthly', tier: null, harness, count, vcpus, memory_mib, disk_gib };
}

export class VmService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly billing: BillingService,
  ) {}

  list(tenantId: string): Promise<VmRow[]> {
    return this.db.query<VmRow>(
      'SELECT * FROM vms WHERE tenant_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, vm_id DESC',
      [tenantId],
    );
  }

  async get(tenantId: string, vmId: string): Promise<VmRow> {
    const [vm] = await this.db.query<VmRow>('SELECT * FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL', [
      tenantId,
      vmId,
    ]);
    if (!vm) throw notFound('VM');
    return vm;
  }

  /**
   * Accepts a create: checks what it would cost, finds a host with room, charges, and records the VM.
   * Until a VM host has registered, there is no room anywhere: 503 with nothing charged.
   */
  async create(tenantId: string, input: CreateVmInput): Promise<never> {
    const order = resolveOrder(input);
    return this.db.transaction(async (tx) => {
      if (order.tier) {
        const hourCents = TIERS[order.tier].cents_per_hour * order.count;
        await this.billing.requireCredits(tx, tenantId, hourCents);
      } else {
        await this.billing.requireCard(tx, tenantId);
      }
      // Placement arrives with the VM hosts; until one registers there is no room anywhere.
      throw new ApiError('unavailable', 'no VM host has room for this VM right now', 'try again later', {
        'Retry-After': RETRY_AFTER_SECONDS,
      });
    });
  }

  /** Records a lifecycle request for the reconciler; answers the VM as it now stands. */
  async lifecycle(tenantId: string, vmId: string, action: LifecycleAction): Promise<VmRow> {
    return this.db.transaction(async (tx) => {
      const [vm] = await tx.query<VmRow>(
        'SELECT * FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL FOR UPDATE',
        [tenantId, vmId],
      );
      if (!vm) throw notFound('VM');
      const patch = applyLifecycle(vm, action);
      if (!patch) return vm;
      const [updated] = await tx.query<VmRow>(
        `UPDATE vms SET status = $3, status_reason = $4, desired_state = $5, restart_requested = $6,
                        reprovision_requested = $7, updated_at = $8
         WHERE tenant_id = $1 AND vm_id = $2 RETURNING *`,
        [tenantId, vmId, patch.status ?? vm.status, patch.status_reason ?? null, patch.desired_state ?? vm.desired_state,
          patch.restart_requested ?? vm.restart_requested, patch.reprovision_requested ?? vm.reprovision_requested,
          this.clock.now()],
      );
      return updated;
    });
  }
}
