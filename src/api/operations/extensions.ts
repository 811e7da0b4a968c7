import { defineOperation } from '../operation.ts';
import { IdParam, SetSecretsRequest, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';

export const destroyVM = defineOperation({
  operationId: 'destroyVM',
  method: 'delete',
  path: '/v1/api/vms/{id}',
  summary: "Destroy a VM: metering stops and its disks are removed (extension)",
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_destroy', destructive: true, idempotent: true },
  cli: { command: 'vms destroy' },
  extension: true,
  params: IdParam,
  success: { status: 200, schema: Vm, description: 'The VM, with status deleted' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({
    body: presentVm(await services.vms.destroy(principal.tenantId, params.id)),
  }),
});

export const setVMSecrets = defineOperation({
  operationId: 'setVMSecrets',
  method: 'put',
  path: '/v1/api/vms/{id}/secrets',
  summary: 'Set or remove bring-your-own-key variables for the harness (extension)',
  description: 'Values are write-only: they are never returned. The VM lists their names in `secret_names`.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_secrets_set', idempotent: true, wholeBody: 'secrets' },
  extension: true,
  params: IdParam,
  body: { schema: SetSecretsRequest, required: true },
  success: { status: 200, schema: Vm, description: 'The VM with its secret names' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ services, principal, params, body }) => ({
    body: presentVm(await services.runs.setSecrets(principal.tenantId, params.id, body)),
  }),
});
