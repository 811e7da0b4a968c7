import { defineOperation } from '../operation.ts';
import { Billing } from '../schemas.ts';
import { notFound } from '../../domain/errors.ts';

export const getBilling = defineOperation({
  operationId: 'getBilling',
  method: 'get',
  path: '/v1/api/billing',
  summary: 'Card on file and prepaid credits',
  tag: 'Billing',
  audience: 'customer',
  mcp: { tool: 'billing_get' },
  cli: { command: 'billing', examples: ['agentvm billing --json'] },
  success: { status: 200, schema: Billing, description: 'Billing status' },
  errors: [],
  handler: async ({ services, principal }) => {
    const billing = await services.billing.get(principal.tenantId);
    if (!billing) throw notFound('tenant');
    return { body: billing };
  },
});
