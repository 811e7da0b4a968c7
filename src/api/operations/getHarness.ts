import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { HarnessSchema, idParam } from '../schemas.ts';
import { getHarness as find } from '../../harness/catalogue.ts';
import { notFound } from '../../domain/errors.ts';

export const getHarness = defineOperation({
  operationId: 'getHarness',
  method: 'get',
  path: '/v1/api/harnesses/{name}',
  summary: 'Get one harness',
  tag: 'Harnesses',
  audience: 'customer',
  mcp: { tool: 'harness_get' },
  cli: { command: 'harnesses get', examples: ['agentvm harnesses get claude-code'] },
  params: z.strictObject({ name: idParam('Harness id as listed') }),
  success: { status: 200, schema: HarnessSchema, description: 'The harness' },
  errors: ['not_found'],
  handler: async ({ params }) => {
    const harness = find(params.name);
    if (!harness) throw notFound('harness');
    return { body: harness };
  },
});
