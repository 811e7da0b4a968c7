import { defineOperation } from '../operation.ts';
import { Whoami } from '../schemas.ts';

export const whoami = defineOperation({
  operationId: 'whoami',
  method: 'get',
  path: '/v1/api/whoami',
  summary: 'Identify the calling key',
  tag: 'Identity',
  audience: 'customer',
  mcp: { tool: 'whoami' },
  cli: { command: 'whoami' },
  success: { status: 200, schema: Whoami, description: 'The tenant and key behind the bearer token' },
  errors: [],
  handler: async ({ principal }) => ({
    body: { tenant_id: principal.tenantId, email: principal.email, scope: principal.scope, key_label: principal.label ?? '' },
  }),
});
