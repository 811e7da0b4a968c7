import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { idParam, AddCreditsRequest, Billing, CreateTenantRequest, CreateTenantResponse, CreditsBalance, SetCardRequest } from '../schemas.ts';
import { notFound } from '../../domain/errors.ts';

/** The operator API of decisions.md section 2: not part of the customer contract. */
const TenantParam = z.strictObject({ tenant_id: idParam() });

export const createTenant = defineOperation({
  operationId: 'adminCreateTenant',
  method: 'post',
  path: '/v1/admin/tenants',
  summary: 'Create a tenant with its first readwrite key',
  tag: 'Operator',
  audience: 'admin',
  body: { schema: CreateTenantRequest, required: true },
  success: { status: 201, schema: CreateTenantResponse, description: 'The tenant and its first key' },
  errors: ['conflict'],
  handler: async ({ services, body }) => ({ body: await services.tenants.create(body.email.trim().toLowerCase()) }),
});

export const setCard = defineOperation({
  operationId: 'adminSetCard',
  method: 'put',
  path: '/v1/admin/tenants/{tenant_id}/card',
  summary: "Put a card on the tenant's file",
  tag: 'Operator',
  audience: 'admin',
  params: TenantParam,
  body: { schema: SetCardRequest, required: true },
  success: { status: 200, schema: Billing, description: 'Billing status' },
  errors: ['not_found'],
  handler: async ({ services, params, body }) => {
    const billing = await services.billing.setCard(params.tenant_id, body);
    if (!billing) throw notFound('tenant');
    return { body: billing };
  },
});

export const removeCard = defineOperation({
  operationId: 'adminRemoveCard',
  method: 'delete',
  path: '/v1/admin/tenants/{tenant_id}/card',
  summary: "Remove the tenant's card",
  tag: 'Operator',
  audience: 'admin',
  params: TenantParam,
  success: { status: 200, schema: Billing, description: 'Billing status' },
  errors: ['not_found'],
  handler: async ({ services, params }) => {
    const billing = await services.billing.setCard(params.tenant_id, null);
    if (!billing) throw notFound('tenant');
    return { body: billing };
  },
});

export const addCredits = defineOperation({
  operationId: 'adminAddCredits',
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/credits',
  summary: 'Add prepaid credits',
  tag: 'Operator',
  audience: 'admin',
  params: TenantParam,
  body: { schema: AddCreditsRequest, required: true },
  success: { status: 200, schema: CreditsBalance, description: 'The new balance' },
  errors: ['not_found'],
  handler: async ({ services, params, body }) => {
    const balance = await services.billing.addCredits(params.tenant_id, body.amount_cents);
    if (balance === null) throw notFound('tenant');
    return { body: { balance_cents: balance } };
  },
});
