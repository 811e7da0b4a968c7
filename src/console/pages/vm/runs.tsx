import { call, type Schemas } from '../../api.ts';
import { Pager, RunStatus, Time, vmPath } from '../../components.tsx';
import { duration } from '../../format.ts';
import { offsetOf, Table, type Column } from '../../table.tsx';
import type { VmSectionContext } from './section.ts';

const RUNS_PAGE = 10;

const columns = (vmId: string): Column<Schemas['Run']>[] => [
  {
    label: 'Task',
    class: 'task-cell',
    cell: (r) => <a href={`${vmPath(vmId)}/runs/${r.run_id}`}>{r.task.length > 80 ? `${r.task.slice(0, 80)}…` : r.task}</a>,
  },
  { label: 'Status', cell: (r) => <RunStatus run={r} /> },
  { label: 'Exit', cell: (r) => r.exit_code ?? '—' },
  { label: 'Took', cell: (r) => duration(r.duration_ms) },
  { label: 'Started', cell: (r) => <Time at={r.started_at ?? r.created_at} /> },
];

/** The VM's runs, newest first, ten a page (`?runs=` is the page's offset). */
export async function RunsSection({ vm, api, c }: VmSectionContext) {
  const offset = offsetOf(c.req.query('runs'));
  const runs = await call(api.GET('/v1/api/vms/{id}/runs', { params: { path: { id: vm.vm_id }, query: { limit: RUNS_PAGE, offset } } }));
  return (
    <section class="card" aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      {runs.total === 0 ? (
        <p class="empty">No runs yet.</p>
      ) : (
        <>
          <Table caption="Runs of this VM, newest first" columns={columns(vm.vm_id)} rows={runs.data} />
          <Pager base={vmPath(vm.vm_id)} param="runs" offset={offset} size={RUNS_PAGE} total={runs.total} label="Runs pages" />
        </>
      )}
    </section>
  );
}
