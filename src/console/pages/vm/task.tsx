import { call } from '../../api.ts';
import type { ConsoleApp } from '../../app.tsx';
import { vmPath } from '../../components.tsx';
import { PostForm, Submit } from '../../form.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

/** A task for the VM's agent; it runs at once and its page streams the output. */
export async function TaskSection({ vm, session }: VmSectionContext) {
  return (
    <section class="card stack" aria-labelledby="task-h">
      <h2 id="task-h">Run a task</h2>
      <PostForm session={session} action={`${vmPath(vm.vm_id)}/runs`} class="stack">
        <label for="task">Task for {vm.harness_display}</label>
        <textarea id="task" name="task" rows={3} required maxlength={65536} placeholder="Describe what the agent should do"></textarea>
        <div class="button-row">
          <Submit label="Run" variant="primary" />
          {vm.status !== 'running' ? <span class="muted small">The VM must be running to take a task.</span> : null}
        </div>
      </PostForm>
    </section>
  );
}

export function registerTask(app: ConsoleApp, act: VmAct) {
  app.post('/vms/:id/runs', async (c) => {
    const id = c.req.param('id')!;
    const task = (await c.req.parseBody()).task;
    return act(c, async () => {
      const run = await call(
        c.get('api').POST('/v1/api/vms/{id}/run', {
          params: { path: { id } },
          body: { task: typeof task === 'string' ? task : '' },
          headers: { Prefer: 'respond-async' },
        }),
      );
      return `${vmPath(id)}/runs/${run.run_id}`;
    });
  });
}
