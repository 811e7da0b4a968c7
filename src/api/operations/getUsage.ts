import { defineOperation } from '../operation.ts';
import { Usage } from '../schemas.ts';

export const getUsage = defineOperation({
  operationId: 'getUsage',
  method: 'get',
  path: '/v1/api/usage',
  summary: 'Live VM counts, monthly recurring revenue and credits',
  description: '`live` counts VMs neither stopped nor failed. MRR sums the monthly price of every plan VM (annual / 12, rounded down).',
  tag: 'Billing',
  audience: 'customer',
  mcp: { tool: 'usage_get' },
  cli: { command: 'usage' },
  success: { status: 200, schema: Usage, description: 'Usage summary' },
  errors: [],
  handler: async ({ services, principal }) => ({ body: await services.usage.get(principal.tenantId) }),
});
