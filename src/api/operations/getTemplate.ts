import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { idParam, Template } from '../schemas.ts';
import { presentTemplate } from '../present.ts';

export const TemplateIdParam = z.strictObject({
  id: idParam('A `tpl_` id, an owned slug or a public slug (owned first)'),
});

export const getTemplate = defineOperation({
  operationId: 'getTemplate',
  method: 'get',
  path: '/v1/api/templates/{id}',
  summary: 'Get a template by id or slug',
  tag: 'Templates',
  audience: 'customer',
  mcp: { tool: 'template_get' },
  cli: { command: 'templates get', examples: ['agentvm templates get python-starter'] },
  params: TemplateIdParam,
  success: { status: 200, schema: Template, description: 'The template' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({
    body: presentTemplate(await services.templates.get(principal.tenantId, params.id), principal.tenantId),
  }),
});
