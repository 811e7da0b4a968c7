import { call, type Schemas } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { Time, vmPath } from '../../components.tsx';
import { bytes } from '../../format.ts';
import { Field, PostForm, Select, Submit } from '../../form.tsx';
import { Table, type Column } from '../../table.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

const EGRESS_LOG_ROWS = 20;

const COLUMNS: Column<Schemas['EgressLog']['data'][number]>[] = [
  { label: 'When', cell: (e) => <Time at={e.at} /> },
  { label: 'Host', class: 'mono', cell: (e) => `${e.host}:${e.port}` },
  {
    label: 'Decision',
    cell: (e) => (
      <>
        <span class={`status status-${e.decision}`}>{e.decision}</span> <span class="muted small">{e.reason}</span>
      </>
    ),
  },
  { label: 'Out / in', cell: (e) => `${bytes(e.bytes_out)} / ${bytes(e.bytes_in)}` },
];

/** What the VM may reach (its egress policy, to change) and the connections it made lately. */
export async function EgressSection({ vm, session, api }: VmSectionContext) {
  const log = await call(api.GET('/v1/api/vms/{id}/egress/log', { params: { path: { id: vm.vm_id }, query: { limit: EGRESS_LOG_ROWS } } }));
  return (
    <section class="card stack" aria-labelledby="egress-h">
      <h2 id="egress-h">Network egress</h2>
      <PostForm session={session} action={`${vmPath(vm.vm_id)}/egress`} class="stack">
        <Field id="egress-mode" label="What the VM may reach">
          <Select
            id="egress-mode"
            name="mode"
            selected={vm.egress.mode}
            options={[
              ['none', 'Nothing'],
              ['allowlist', 'Only the hosts listed below'],
              ['public', 'Any public address'],
            ]}
          />
        </Field>
        <Field id="egress-allow" label="Allowed hosts, one a line">
          <textarea id="egress-allow" name="allow" rows={3} aria-describedby="egress-allow-help">
            {vm.egress.allow.join('\n')}
          </textarea>
          <p id="egress-allow-help" class="muted small">
            Hostnames such as api.example.com, or *.example.org for any subdomain. Used only in the allow-list mode.
          </p>
        </Field>
        <div>
          <Submit label="Save policy" />
        </div>
      </PostForm>
      <h3>Recent connections</h3>
      {log.data.length === 0 ? <p class="empty">No connections recorded in the last 7 days.</p> : <Table caption="Egress log, newest first" columns={COLUMNS} rows={log.data} />}
    </section>
  );
}

export function registerEgress(app: ConsoleApp, act: VmAct) {
  app.post('/vms/:id/egress', async (c) => {
    const id = c.req.param('id')!;
    const mode = await field(c, 'mode');
    const allow = (await field(c, 'allow')).split(/[\s,]+/).filter(Boolean);
    return act(c, async () => {
      await call(c.get('api').PUT('/v1/api/vms/{id}/egress', { params: { path: { id } }, body: { mode: mode as 'none', allow } }));
      return `${vmPath(id)}?done=egress#egress-h`;
    });
  });
}
