import { defineOperation } from '../operation.ts';
import { CreatedWebhook, CreateWebhookRequest, PageQuery, Webhook, WebhookDeliveryPage, WebhookList, WebhookParams } from '../schemas.ts';
import { iso } from '../present.ts';
import type { WebhookRow } from '../../store/webhooks.ts';

const present = (w: WebhookRow) => ({ webhook_id: w.webhook_id, url: w.url, events: w.events as never, created_at: iso(w.created_at) });

export const createWebhook = defineOperation({
  operationId: 'createWebhook',
  method: 'post',
  path: '/v1/api/webhooks',
  summary: 'Have events POSTed to a URL (extension)',
  description:
    'Each delivery POSTs one event as JSON with the header `agentvm-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" ' +
    'with the secret>`. A non-2xx answer, or none within 10 s, is retried with exponential backoff and jitter for 24 hours: at ' +
    'least once, so receivers dedupe on `event_id`. The URL must be https to a public address (checked again at each delivery, ' +
    'on the address its name resolves to); the operator may allow other hosts with AGENTVM_WEBHOOK_ALLOW_HOSTS.',
  tag: 'Webhooks',
  audience: 'customer',
  mcp: { tool: 'webhook_create' },
  cli: { command: 'webhooks create', examples: ['agentvm webhooks create --url https://example.com/hooks --events vm.stopped run.finished'] },
  extension: true,
  body: { schema: CreateWebhookRequest, required: true },
  success: { status: 201, schema: CreatedWebhook, description: 'The webhook, with its signing secret shown only here' },
  errors: ['quota_exceeded'],
  handler: async ({ services, principal, body }) => {
    const w = await services.webhooks.create(principal.tenantId, body);
    return { body: { ...present(w), secret: w.secret } };
  },
});

export const listWebhooks = defineOperation({
  operationId: 'listWebhooks',
  method: 'get',
  path: '/v1/api/webhooks',
  summary: "The tenant's webhooks, newest first (extension)",
  tag: 'Webhooks',
  audience: 'customer',
  mcp: { tool: 'webhooks_list' },
  cli: { command: 'webhooks list', columns: ['webhook_id', 'url', 'events', 'created_at'] },
  extension: true,
  success: { status: 200, schema: WebhookList, description: 'The webhooks; never their secrets' },
  errors: [],
  handler: async ({ services, principal }) => ({ body: { data: (await services.webhooks.list(principal.tenantId)).map(present) } }),
});

export const deleteWebhook = defineOperation({
  operationId: 'deleteWebhook',
  method: 'delete',
  path: '/v1/api/webhooks/{webhook_id}',
  summary: 'Delete a webhook; its pending deliveries are not sent (extension)',
  tag: 'Webhooks',
  audience: 'customer',
  mcp: { tool: 'webhook_delete', destructive: true },
  cli: { command: 'webhooks delete' },
  extension: true,
  params: WebhookParams,
  success: { status: 200, schema: Webhook, description: 'The deleted webhook' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({ body: present(await services.webhooks.remove(principal.tenantId, params.webhook_id)) }),
});

export const listWebhookDeliveries = defineOperation({
  operationId: 'listWebhookDeliveries',
  method: 'get',
  path: '/v1/api/webhooks/{webhook_id}/deliveries',
  summary: "A webhook's delivery log, newest first (extension)",
  description: 'Each event sent to the webhook: its status (pending, delivered, failed), attempts, the last answer or error, and when it is tried next.',
  tag: 'Webhooks',
  audience: 'customer',
  mcp: { tool: 'webhook_deliveries_list' },
  cli: { command: 'webhooks deliveries', columns: ['created_at', 'event_type', 'status', 'attempts', 'last_status_code', 'last_error', 'next_attempt_at'], examples: ['agentvm webhooks deliveries wh_…'] },
  extension: true,
  params: WebhookParams,
  query: PageQuery,
  success: { status: 200, schema: WebhookDeliveryPage, description: 'A page of deliveries' },
  errors: ['not_found'],
  handler: async ({ services, principal, params, query }) => {
    const { rows, has_more } = await services.webhooks.deliveries(principal.tenantId, params.webhook_id, query.limit, query.offset);
    return {
      body: {
        data: rows.map((d) => ({
          delivery_id: d.delivery_id,
          event_id: d.event_id,
          event_type: d.event_type as never,
          status: d.status,
          attempts: d.attempts,
          last_status_code: d.last_status_code,
          last_error: d.last_error,
          last_attempt_at: d.last_attempt_at ? iso(d.last_attempt_at) : null,
          next_attempt_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
          delivered_at: d.delivered_at ? iso(d.delivered_at) : null,
          created_at: iso(d.created_at),
        })),
        has_more,
        next_offset: has_more ? query.offset + rows.length : null,
      },
    };
  },
});
