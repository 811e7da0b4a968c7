import { call, ClientError } from '../../api.ts';
import { field, type ConsoleApp, type ConsoleContext } from '../../app.tsx';
import { vmPath } from '../../components.tsx';
import { Field, PostForm, Submit } from '../../form.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

/** The VM's secrets by name (values are write-only), each removable, and a form that sets one. */
export async function SecretsSection({ vm, session }: VmSectionContext) {
  return (
    <section class="card stack half" aria-labelledby="secrets-h">
      <h2 id="secrets-h">Secrets</h2>
      <p class="muted small">Environment variables for the agent, such as a provider's API key. Values are write-only: nobody can read them back here.</p>
      {vm.secret_names.length === 0 ? (
        <p class="empty">No secrets set.</p>
      ) : (
        <ul class="secret-list">
          {vm.secret_names.map((name) => (
            <li>
              <code>{name}</code>
              {vm.brokered_secret_names.includes(name) ? <span class="badge" title="Kept by the platform; never enters the VM">brokered</span> : null}
              <PostForm session={session} action={`${vmPath(vm.vm_id)}/secrets/remove`} class="inline" hidden={{ name }}>
                <Submit label="Remove" variant="ghost" small ariaLabel={`Remove secret ${name}`} />
              </PostForm>
            </li>
          ))}
        </ul>
      )}
      <PostForm session={session} action={`${vmPath(vm.vm_id)}/secrets`} class="stack">
        <Field id="secret-name" label="Name">
          <input id="secret-name" name="name" required pattern="[A-Za-z_][A-Za-z0-9_]*" placeholder="ANTHROPIC_API_KEY" autocomplete="off" spellcheck={false} />
        </Field>
        <Field id="secret-value" label="Value">
          <input id="secret-value" name="value" type="password" required autocomplete="new-password" />
        </Field>
        <div>
          <Submit label="Set secret" />
        </div>
      </PostForm>
    </section>
  );
}

export function registerSecrets(app: ConsoleApp, act: VmAct) {
  const setSecret = (c: ConsoleContext, id: string, name: string, value: string | null, done: string) =>
    act(c, async () => {
      if (!name) throw new ClientError('invalid_request', 'name: a secret needs a name', undefined, 400);
      await call(c.get('api').PUT('/v1/api/vms/{id}/secrets', { params: { path: { id } }, body: { [name]: value } }));
      return `${vmPath(id)}?done=${done}#secrets-h`;
    });
  app.post('/vms/:id/secrets', async (c) => {
    const form = await c.req.parseBody();
    const value = typeof form.value === 'string' ? form.value : '';
    return setSecret(c, c.req.param('id')!, await field(c, 'name'), value, 'secret_set');
  });
  app.post('/vms/:id/secrets/remove', async (c) => setSecret(c, c.req.param('id')!, await field(c, 'name'), null, 'secret_removed'));
}
