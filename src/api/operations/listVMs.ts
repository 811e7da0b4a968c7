import { defineOperation } from '../operation.ts';
import { VmList } from '../schemas.ts';
import { presentVm } from '../present.ts';

export const listVMs = defineOperation({
  operationId: 'listVMs',
  method: 'get',
  path: '/v1/api/vms',
  summary: "List the tenant's VMs, newest first",
  tag: 'VMs',
  audience: 'customer',
  success: { status: 200, schema: VmList, description: "The tenant's VMs" },
  errors: [],
  handler: async ({ services, principal }) => {
    const vms = await services.vms.list(principal.tenantId);
    return { body: { data: vms.map(presentVm), total: vms.length } };
  },
});
