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
  mcp: { tool: 'vms_list' },
  cli: { command: 'vms list', columns: ['vm_id', 'status', 'plan', 'tier', 'harness', 'ipv4', 'created_at'] },
  success: { status: 200, schema: VmList, description: "The tenant's VMs" },
  errors: [],
  handler: async ({ services, principal }) => {
    const vms = await services.vms.list(principal.tenantId);
    return { body: { data: vms.map(presentVm), total: vms.length } };
  },
});
