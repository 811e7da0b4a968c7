import { call } from '../api.ts';
import type { ConsoleApp } from '../app.tsx';
import { ConfirmForm } from '../form.tsx';
import { page } from '../layout.tsx';
import { onRefusal } from '../problem.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { findWebhook, webhookPath, webhooksPage } from './webhooks.tsx';

/** Deleting a webhook: what goes with it, asked first. */
export function registerWebhookDelete(app: ConsoleApp) {
  app.get('/webhooks/:id/delete', async (c) => {
    const session = c.get('session') as ConsoleSession;
    const hook = await findWebhook(c, c.req.param('id')!);
    return page(
      c,
      { title: 'Delete this webhook?', section: 'webhooks', session, crumbs: [{ href: '/console/webhooks', label: 'Webhooks' }] },
      <ConfirmForm session={session} action={`${webhookPath(hook.webhook_id)}/delete`} label="Delete webhook" keep="/console/webhooks">
        <p>
          Events will no longer be sent to <strong class="mono wrap-anywhere">{hook.url}</strong>, and its pending deliveries are dropped. Its delivery log goes with it.
        </p>
      </ConfirmForm>,
    );
  });
  app.post('/webhooks/:id/delete', (c) =>
    onRefusal(
      async () => {
        await call(c.get('api').DELETE('/v1/api/webhooks/{webhook_id}', { params: { path: { webhook_id: c.req.param('id')! } } }));
        return c.redirect('/console/webhooks?done=webhook_deleted', 303);
      },
      (problem) => webhooksPage(c, { problem, status: problem.status }),
    ),
  );
}
