import { call } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { vmPath } from '../../components.tsx';
import { Field, PostForm, Select, Submit } from '../../form.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

/** The persist disk captured as a template, private or public (secrets scrubbed from a public copy). */
export async function CaptureSection({ vm, session }: VmSectionContext) {
  return (
    <section class="card stack half" aria-labelledby="capture-h">
      <h2 id="capture-h">Capture as a template</h2>
      <p class="muted small">Snapshots the persist disk only. A public capture has secrets scrubbed from the copy.</p>
      <PostForm session={session} action={`${vmPath(vm.vm_id)}/capture`} class="stack">
        <Field id="capture-name" label="Template name">
          <input id="capture-name" name="name" maxlength={100} required />
        </Field>
        <Field id="capture-visibility" label="Visibility">
          <Select
            id="capture-visibility"
            name="visibility"
            options={[
              ['private', 'Private (only you)'],
              ['public', 'Public (in the gallery)'],
            ]}
          />
        </Field>
        <div>
          <Submit label="Capture" />
        </div>
      </PostForm>
    </section>
  );
}

export function registerCapture(app: ConsoleApp, act: VmAct) {
  app.post('/vms/:id/capture', async (c) => {
    const id = c.req.param('id')!;
    const name = await field(c, 'name');
    const visibility = (await field(c, 'visibility')) as 'public';
    return act(c, async () => {
      await call(c.get('api').POST('/v1/api/vms/{id}/capture', { params: { path: { id } }, body: { name, visibility } }));
      return '/console/templates?sort=new&done=capturing';
    });
  });
}
