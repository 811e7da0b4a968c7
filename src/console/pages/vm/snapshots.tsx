import { call, idempotencyHeader, type Schemas } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { pricingOf, vmPath } from '../../components.tsx';
import { Field, PostForm, Select, Submit } from '../../form.tsx';
import { money } from '../../format.ts';
import { planPriceCents, TIERS, type TierId } from '../../../domain/plans.ts';
import { newCsrfValue } from '../../security.ts';
import { Table } from '../../table.tsx';
import { snapshotColumns } from '../snapshots.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

/** What a new VM of a tier costs, said before it is charged (the domain's price table). */
const tierPrice = (tier: TierId) => `${TIERS[tier].cents_per_hour}¢ per hour from credits, at least ${money(TIERS[tier].cents_per_hour)} of credits each`;

/** What a new VM from this one costs, said before it is charged. */
function priceOfNew(vm: Schemas['VM']): string {
  if (vm.tier) return tierPrice(vm.tier);
  if (vm.plan && vm.cycle) return `${money(planPriceCents(vm.plan, vm.cycle))} each, charged to your card now`;
  return 'charged like a new VM';
}

/** Whether a spot tier VM has this VM's size (a branch keeps the memory's size; a swarm is spot tier). */
const spotFits = (vm: Schemas['VM']) => vm.vcpus === TIERS.spot.vcpus && vm.memory_mib === TIERS.spot.memory_mib && vm.disk_gib === TIERS.spot.disk_gib;

/**
 * Branching the running VM into new VMs that go on from this instant, snapshots of it (memory, devices
 * and disks), and the snapshots taken of it: a VM started from one, or deleted.
 */
export async function SnapshotsSection({ vm, session, api }: VmSectionContext) {
  const snapshots = await call(api.GET('/v1/api/snapshots', { params: { query: { vm_id: vm.vm_id, limit: 20 } } }));
  const running = vm.status === 'running';
  const spot = spotFits(vm);
  const columns = snapshotColumns(
    (s) => (
      <div class="button-row">
        <PostForm session={session} action={`${vmPath(vm.vm_id)}/snapshots/${encodeURIComponent(s.snapshot_id)}/start`} class="inline" hidden={{ idempotency_key: newCsrfValue() }}>
          <Submit label="Start a VM from it" small ariaLabel={`Start a VM from it: ${s.name} (${pricingOf(vm)}, ${priceOfNew(vm)})`} />
        </PostForm>
        <PostForm session={session} action={`${vmPath(vm.vm_id)}/snapshots/${encodeURIComponent(s.snapshot_id)}/delete`} class="inline">
          <Submit label="Delete" small variant="danger" ariaLabel={`Delete the snapshot ${s.name}`} />
        </PostForm>
      </div>
    ),
    false,
  );
  return (
    <section class="card stack" aria-labelledby="snapshots-h" id="snapshots">
      <h2 id="snapshots-h">Branches and snapshots</h2>
      {running ? (
        <div class="stack">
          <p class="muted small">
            A branch is a new VM that goes on from this instant: its processes, memory and files as they are now, with an identity of its own. This VM pauses while its
            memory is saved, then runs on. Each new VM is charged like a new one: as this VM ({pricingOf(vm)}, {priceOfNew(vm)})
            {spot ? <>, or spot tier ({tierPrice('spot')}). Several at once are spot tier VMs only.</> : <>. Several at once are spot tier VMs only, and a spot VM is smaller than this one: it branches one at a time.</>}
          </p>
          <PostForm session={session} action={`${vmPath(vm.vm_id)}/branch`} class="inline-form" hidden={{ idempotency_key: newCsrfValue() }}>
            <Field id="branch-count" label="New VMs">
              <input id="branch-count" name="count" type="number" min={1} max={spot ? 20 : 1} value="1" required />
            </Field>
            <Field id="branch-pricing" label="Pricing">
              <Select
                id="branch-pricing"
                name="pricing"
                options={[
                  ['same', `As this VM (${pricingOf(vm)}), one VM`],
                  ...(spot ? [['spot', 'Spot tier (credits), any number'] as [string, string]] : []),
                ]}
              />
            </Field>
            <Submit label="Branch" />
          </PostForm>
          <PostForm session={session} action={`${vmPath(vm.vm_id)}/snapshots`} class="inline-form">
            <Field id="snapshot-name" label="Snapshot name">
              <input id="snapshot-name" name="name" maxlength={100} placeholder="tests green" />
            </Field>
            <Submit label="Take a snapshot" variant="ghost" />
          </PostForm>
        </div>
      ) : (
        <p class="muted small">
          Branching and taking a snapshot need the VM running; its snapshots below can be started whatever its state, each new VM charged as this one ({pricingOf(vm)},{' '}
          {priceOfNew(vm)}).
        </p>
      )}
      <Table caption={`Snapshots of ${vm.vm_id}`} columns={columns} rows={snapshots.data} empty="No snapshot of this VM yet." />
      <p class="muted small">
        <a href="/console/snapshots">All your snapshots</a>, also of VMs destroyed since.
      </p>
    </section>
  );
}

export function registerSnapshots(app: ConsoleApp, act: VmAct) {
  app.post('/vms/:id/branch', async (c) => {
    const id = c.req.param('id')!;
    const count = Number.parseInt(await field(c, 'count'), 10) || 1;
    const spot = (await field(c, 'pricing')) === 'spot';
    const headers = idempotencyHeader(await field(c, 'idempotency_key'));
    return act(c, async () => {
      const branched = await call(c.get('api').POST('/v1/api/vms/{id}/branch', { params: { path: { id } }, body: { count, ...(spot ? { tier: 'spot' } : {}) }, headers }));
      return branched.vm_ids.length === 1 ? `${vmPath(branched.vm_ids[0])}?done=branched` : '/console/vms?done=branched';
    });
  });
  app.post('/vms/:id/snapshots', async (c) => {
    const id = c.req.param('id')!;
    const name = (await field(c, 'name')).trim();
    return act(c, async () => {
      await call(c.get('api').POST('/v1/api/vms/{id}/snapshots', { params: { path: { id } }, body: name ? { name } : {} }));
      return `${vmPath(id)}?done=snapshot_taken#snapshots`;
    });
  });
  app.post('/vms/:id/snapshots/:sid/start', async (c) => {
    const sid = c.req.param('sid')!;
    const headers = idempotencyHeader(await field(c, 'idempotency_key'));
    return act(c, async () => {
      const started = await call(c.get('api').POST('/v1/api/snapshots/{id}/vms', { params: { path: { id: sid } }, body: {}, headers }));
      return `${vmPath(started.vm_ids[0])}?done=snapshot_started`;
    });
  });
  app.post('/vms/:id/snapshots/:sid/delete', async (c) => {
    const id = c.req.param('id')!;
    const sid = c.req.param('sid')!;
    return act(c, async () => {
      await call(c.get('api').DELETE('/v1/api/snapshots/{id}', { params: { path: { id: sid } } }));
      return `${vmPath(id)}?done=snapshot_deleted#snapshots`;
    });
  });
}
