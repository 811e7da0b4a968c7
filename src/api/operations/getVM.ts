import { defineOperation } from '../operation.ts';
import { IdOrLabelParam, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';

export const getVM = defineOperation({
  operationId: 'getVM',
  method: 'get',
  path: '/v1/api/vms/{id}',
  summary: 'Get one VM',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_get' },
  cli: { command: 'vms get' },
  params: IdOrLabelParam,
  success: { status: 200, schema: Vm, description: 'The VM' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({
    body: presentVm(await services.vms.getByIdOrLabel(principal.tenantId, params.id)),
  }),
});
