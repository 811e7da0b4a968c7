import { call, ClientError, type Schemas } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { ActionButton, pricingOf, Status, Time, vmPath } from '../../components.tsx';
import { TRANSITIONAL } from '../../format.ts';
import { fragment } from '../../layout.tsx';
import type { ConsoleSession } from '../../../domain/sessions.ts';
import { actionsFor } from '../../../domain/vmState.ts';
import type { VmAct } from './section.ts';

const LIFECYCLE = ['stop', 'start', 'restart', 'reprovision', 'suspend'] as const;

/** The VM's facts and lifecycle buttons; polls itself while the status is changing. */
export function Facts({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  const poll = TRANSITIONAL.has(vm.status) ? 'every 2s' : 'every 15s';
  return (
    <section id="facts" class="card" aria-labelledby="facts-h" hx-get={`${vmPath(vm.vm_id)}/facts`} hx-trigger={poll} hx-swap="outerHTML">
      <div class="section-head">
        <h2 id="facts-h">Overview</h2>
        <div class="button-row">
          {actionsFor(vm.status).map((a) => (
            <ActionButton session={session} action={`${vmPath(vm.vm_id)}/${a}`} label={a[0].toUpperCase() + a.slice(1)} />
          ))}
          <a class="button small danger-ghost" href={`${vmPath(vm.vm_id)}/destroy`}>
            Destroy…
          </a>
        </div>
      </div>
      <dl class="facts grid-facts">
        <dt>Status</dt>
        <dd>
          <Status status={vm.status} reason={vm.status_reason} />
        </dd>
        <dt>Harness</dt>
        <dd>{vm.harness_display}</dd>
        <dt>Pricing</dt>
        <dd>{pricingOf(vm)}</dd>
        <dt>Size</dt>
        <dd>
          {vm.vcpus} vCPU · {vm.memory_mib / 1024} GiB memory · {vm.disk_gib} GiB persist disk
        </dd>
        <dt>IPv4</dt>
        <dd class="mono">{vm.ipv4 ?? '—'}</dd>
        <dt>Template</dt>
        <dd class="mono">{vm.template_id ?? '—'}</dd>
        <dt>Created</dt>
        <dd>
          <Time at={vm.created_at} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time at={vm.updated_at} />
        </dd>
      </dl>
    </section>
  );
}

/** The facts alone (the section polls them), and the lifecycle buttons' changes, back to the page or the list. */
export function registerFacts(app: ConsoleApp, act: VmAct) {
  app.get('/vms/:id/facts', async (c) => {
    let vm: Schemas['VM'];
    try {
      vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id: c.req.param('id') } } }));
    } catch (err) {
      // Destroyed while its page was open (elsewhere, or by another tab): the section says so and stops polling.
      if (!(err instanceof ClientError) || err.code !== 'not_found') throw err;
      return fragment(
        c,
        <section id="facts" class="card" aria-labelledby="facts-h">
          <h2 id="facts-h">Overview</h2>
          <p role="status">
            This VM no longer exists. <a href="/console/vms">Your VMs</a>
          </p>
        </section>,
      );
    }
    return fragment(c, <Facts vm={vm} session={c.get('session')} />);
  });
  for (const action of LIFECYCLE) {
    app.post(`/vms/:id/${action}`, async (c) => {
      const id = c.req.param('id')!;
      const back = (await field(c, 'back')) === 'list' ? `/console/vms?done=${action}` : `${vmPath(id)}?done=${action}`;
      return act(c, async () => {
        await call(c.get('api').POST(`/v1/api/vms/{id}/${action}`, { params: { path: { id } } }));
        return back;
      });
    });
  }
}
