import { defineOperation } from '../operation.ts';
import { LedgerPage, PageQuery } from '../schemas.ts';
import { iso } from '../present.ts';

export const listLedger = defineOperation({
  operationId: 'listLedger',
  method: 'get',
  path: '/v1/api/billing/ledger',
  summary: "The tenant's ledger: every charge, credit purchase and draw, newest first (extension)",
  description: 'Append-only: a correction is a new entry. A VM\'s entries carry its `vm_id`; its `cost_cents_month` sums them for the month.',
  tag: 'Billing',
  audience: 'customer',
  mcp: { tool: 'ledger_list' },
  cli: { command: 'billing ledger', columns: ['created_at', 'kind', 'amount_cents', 'credits_delta_cents', 'vm_id', 'description'], paged: true, examples: ['agentvm billing ledger --limit 50'] },
  extension: true,
  query: PageQuery,
  success: { status: 200, schema: LedgerPage, description: 'A page of the ledger' },
  errors: [],
  handler: async ({ services, principal, query }) => {
    const { rows, total } = await services.billing.ledger(principal.tenantId, query.limit, query.offset);
    const has_more = query.offset + rows.length < total;
    return {
      body: {
        data: rows.map((e) => ({
          entry_id: `led_${e.entry_id}`,
          kind: e.kind,
          amount_cents: e.amount_cents,
          credits_delta_cents: e.credits_delta_cents,
          vm_id: e.vm_id,
          template_id: e.template_id,
          description: e.description,
          created_at: iso(e.created_at),
        })),
        total,
        has_more,
        next_offset: has_more ? query.offset + rows.length : null,
      },
    };
  },
});
