import { defineOperation } from '../operation.ts';
import { TemplateList, TemplateListQuery } from '../schemas.ts';
import { presentTemplate } from '../present.ts';

export const listTemplates = defineOperation({
  operationId: 'listTemplates',
  method: 'get',
  path: '/v1/api/templates',
  summary: "List the caller's templates merged with the public gallery",
  description:
    'Sort `trending` (default) ranks by (2 x forks + stars) / (age in hours + 2)^1.5; `new` by creation, newest first; ' +
    '`forks` and `stars` by those counts. `total` counts the whole matching set.',
  tag: 'Templates',
  audience: 'customer',
  mcp: { tool: 'templates_list' },
  cli: { command: 'templates list', columns: ['template_id', 'slug', 'name', 'harness', 'visibility', 'forks', 'stars', 'status'], paged: true, examples: ['agentvm templates list --q python --sort stars'] },
  query: TemplateListQuery,
  success: { status: 200, schema: TemplateList, description: 'One page of templates' },
  errors: [],
  handler: async ({ services, principal, query }) => {
    const { rows, total } = await services.templates.list(principal.tenantId, query);
    const end = query.offset + rows.length;
    const hasMore = end < total;
    return {
      body: {
        data: rows.map((t) => presentTemplate(t, principal.tenantId)),
        total,
        has_more: hasMore,
        next_offset: hasMore ? end : null,
      },
    };
  },
});
