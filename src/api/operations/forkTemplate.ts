import { defineOperation } from '../operation.ts';
import { ForkRequest, ForkResponse } from '../schemas.ts';
import { TemplateIdParam } from './getTemplate.ts';
import { idempotencyKey, replayable } from '../idempotency.ts';

export const forkTemplate = defineOperation({
  operationId: 'forkTemplate',
  method: 'post',
  path: '/v1/api/templates/{id}/fork',
  summary: 'Fork a template into a new VM (charges money)',
  description: "Charges the card on file for the plan (default: the template's, else starter). There is no free fork.",
  tag: 'Templates',
  audience: 'customer',
  mcp: { tool: 'template_fork' },
  money: true,
  params: TemplateIdParam,
  body: { schema: ForkRequest, required: false },
  success: { status: 201, schema: ForkResponse, description: 'The new VM, seeded from the template' },
  errors: ['not_found', 'card_required', 'card_declined', 'quota_exceeded', 'idempotency_conflict', 'unavailable'],
  handler: async ({ c, services, principal, params, body }) => {
    const key = idempotencyKey(c.req.header('idempotency-key'));
    return replayable(await services.vms.fork(principal.tenantId, params.id, body ?? {}, key));
  },
});
