import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { idParam } from '../schemas.ts';
import { DEFAULT_LIMITS, LIMIT_DESCRIPTIONS, LIMIT_NAMES, MAX_LIMIT, type LimitName } from '../../domain/limits.ts';

/** Limits and quotas (decisions section 14): the tenant's limits beside what it holds, by the same names. */

const shape = <T extends z.ZodType>(field: (name: LimitName) => T) =>
  Object.fromEntries(LIMIT_NAMES.map((n) => [n, field(n)])) as Record<LimitName, T>;

export const Limits = z
  .object(shape((n) => z.int().min(0).meta({ description: `${LIMIT_DESCRIPTIONS[n]}. Default ${DEFAULT_LIMITS[n]}` })))
  .meta({ id: 'Limits', description: "The tenant's limits: the defaults, with the operator's changes" });

export const LimitUsage = z
  .object(shape((n) => z.int().min(0).meta({ description: LIMIT_DESCRIPTIONS[n] })))
  .meta({ id: 'LimitUsage', description: 'What the tenant holds now, counted as the limits count it' });

export const LimitsView = z.object({ limits: Limits, usage: LimitUsage }).meta({ id: 'LimitsView' });

export const SetLimitsRequest = z
  .strictObject(
    shape((n) =>
      z
        .int()
        .min(0)
        .max(MAX_LIMIT)
        .nullable()
        .optional()
        .meta({ description: `New value of ${n} (default ${DEFAULT_LIMITS[n]}); null gives it back its default` }),
    ),
  )
  .meta({ id: 'SetLimitsRequest', description: 'Only the limits to change; the others keep their values' });

export const getLimits = defineOperation({
  operationId: 'getLimits',
  method: 'get',
  path: '/v1/api/limits',
  summary: "The tenant's limits and what it holds of each (extension)",
  description:
    'A create, fork, capture, start, webhook, key, event stream or shell that would take a count over its limit is refused with ' +
    '403 `quota_exceeded` naming the limit, its value and the current count, and charges and changes nothing. The operator ' +
    'changes limits per tenant (`PUT /v1/admin/tenants/{tenant_id}/limits`).',
  tag: 'Billing',
  audience: 'customer',
  mcp: { tool: 'limits_get' },
  cli: { command: 'limits', columns: ['limit', 'value', 'used'], examples: ['agentvm limits'] },
  extension: true,
  success: { status: 200, schema: LimitsView, description: 'Limits and usage, by the same names' },
  errors: [],
  handler: async ({ services, principal }) => ({ body: await services.limits.view(principal.tenantId) }),
});

export const adminSetLimits = defineOperation({
  operationId: 'adminSetLimits',
  method: 'put',
  path: '/v1/admin/tenants/{tenant_id}/limits',
  summary: "Change some of a tenant's limits",
  description:
    'A partial object: each limit given is set (a whole number from 0), null gives it back its default, the rest keep theirs. ' +
    'A lowered limit refuses new creates only: nothing the tenant holds is stopped or removed.',
  tag: 'Operator',
  audience: 'admin',
  params: z.strictObject({ tenant_id: idParam() }),
  body: { schema: SetLimitsRequest, required: true },
  success: { status: 200, schema: LimitsView, description: "The tenant's limits and usage after the change" },
  errors: ['not_found'],
  handler: async ({ services, params, body }) => ({ body: await services.limits.set(params.tenant_id, body) }),
});
