import { defineOperation } from '../operation.ts';
import { CreateVmRequest, CreateVmResponse } from '../schemas.ts';
import { idempotencyKey, replayable } from '../idempotency.ts';

export const createVM = defineOperation({
  operationId: 'createVM',
  method: 'post',
  path: '/v1/api/vms',
  summary: 'Provision a VM (charges money)',
  description:
    'Charges the card on file for a flat plan, or needs an hour of prepaid credits per VM for a usage tier. ' +
    'Send an Idempotency-Key header to retry safely: the first response is replayed and the charge happens once.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_provision' },
  money: true,
  body: { schema: CreateVmRequest, required: true },
  success: { status: 201, schema: CreateVmResponse, description: 'Accepted for provisioning' },
  errors: ['card_required', 'card_declined', 'insufficient_credits', 'quota_exceeded', 'idempotency_conflict', 'unavailable'],
  handler: async ({ c, services, principal, body }) => {
    const key = idempotencyKey(c.req.header('idempotency-key'));
    return replayable(await services.vms.create(principal.tenantId, body, key));
  },
});
