import { call, ClientError } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { Time, vmPath } from '../../components.tsx';
import { duration } from '../../format.ts';
import { Field, PostForm, Submit } from '../../form.tsx';
import type { VmAct, VmSectionContext } from './section.ts';

/** Idle stop and expiry: what they are, and a form to change them (PATCH /v1/api/vms/{id}). */
export async function LifetimeSection({ vm, session }: VmSectionContext) {
  return (
    <section class="card stack half" aria-labelledby="lifetime-h">
      <h2 id="lifetime-h">Idle stop and expiry</h2>
      <dl class="facts" id="lifetime">
        <dt>Idle stop</dt>
        <dd>{vm.auto_stop_after_s === null ? 'never' : `after ${duration(vm.auto_stop_after_s * 1000)} without a run, a shell or egress`}</dd>
        <dt>Expires</dt>
        <dd>{vm.expires_at ? <Time at={vm.expires_at} /> : 'never'}</dd>
      </dl>
      <PostForm session={session} action={`${vmPath(vm.vm_id)}/lifetime`} class="stack">
        <Field id="auto-stop" label="Stop when idle for (minutes; empty: never)">
          <input id="auto-stop" name="auto_stop_min" inputmode="numeric" pattern="[0-9]*" value={vm.auto_stop_after_s === null ? '' : String(Math.round(vm.auto_stop_after_s / 60))} />
        </Field>
        <Field id="expires-at" label="Destroy at (RFC 3339, e.g. 2026-12-31T18:00:00Z; empty: never)">
          <input id="expires-at" name="expires_at" class="mono" autocomplete="off" spellcheck={false} value={vm.expires_at ?? ''} />
        </Field>
        <div class="button-row">
          <Submit label="Save" />
        </div>
      </PostForm>
    </section>
  );
}

export function registerLifetime(app: ConsoleApp, act: VmAct) {
  app.post('/vms/:id/lifetime', async (c) => {
    const id = c.req.param('id')!;
    const minutes = await field(c, 'auto_stop_min');
    const expires = await field(c, 'expires_at');
    return act(c, async () => {
      if (minutes && !/^\d{1,6}$/.test(minutes)) throw new ClientError('invalid_request', 'auto_stop_after_s: minutes as a whole number', 'leave it empty for never', 400);
      await call(
        c.get('api').PATCH('/v1/api/vms/{id}', {
          params: { path: { id } },
          body: { auto_stop_after_s: minutes ? Number(minutes) * 60 : null, expires_at: expires || null },
        }),
      );
      return `${vmPath(id)}?done=lifetime#lifetime-h`;
    });
  });
}
