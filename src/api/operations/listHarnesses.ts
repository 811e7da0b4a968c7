import { defineOperation } from '../operation.ts';
import { HarnessList } from '../schemas.ts';
import { DEFAULT_HARNESS, listHarnesses as catalogue } from '../../harness/catalogue.ts';

export const listHarnesses = defineOperation({
  operationId: 'listHarnesses',
  method: 'get',
  path: '/v1/api/harnesses',
  summary: 'List the agent runtimes (harnesses) a VM can run',
  tag: 'Harnesses',
  audience: 'customer',
  mcp: { tool: 'harnesses_list' },
  cli: { command: 'harnesses list', columns: ['id', 'display_name', 'auth', 'providers', 'default'] },
  success: { status: 200, schema: HarnessList, description: 'The harness catalogue' },
  errors: [],
  handler: async () => ({ body: { data: catalogue(), default: DEFAULT_HARNESS } }),
});
