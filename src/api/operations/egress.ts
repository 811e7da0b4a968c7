import { defineOperation } from '../operation.ts';
import { Egress, EgressLog, EgressLogQuery, IdParam, Vm } from '../schemas.ts';
import { iso, presentVm } from '../present.ts';

export const setVMEgress = defineOperation({
  operationId: 'setVMEgress',
  method: 'put',
  path: '/v1/api/vms/{id}/egress',
  summary: "Replace a VM's egress policy (extension)",
  description:
    "Applies to the VM's new connections within a second, running or not. Private, loopback, link-local and the host's own " +
    'addresses stay unreachable whatever the policy.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_egress_set', idempotent: true },
  extension: true,
  params: IdParam,
  body: { schema: Egress, required: true },
  success: { status: 200, schema: Vm, description: 'The VM with its new policy' },
  errors: ['not_found'],
  handler: async ({ services, principal, params, body }) => ({
    body: presentVm(await services.vms.setEgress(principal.tenantId, params.id, body)),
  }),
});

export const listVMEgress = defineOperation({
  operationId: 'listVMEgress',
  method: 'get',
  path: '/v1/api/vms/{id}/egress/log',
  summary: "A VM's connections through the egress gateway, newest first (extension)",
  description: 'Host, port, decision, reason and bytes of each connection, kept 7 days; never a request body, header or key.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_egress_log' },
  cli: { command: 'vms egress-log', columns: ['at', 'decision', 'host', 'port', 'reason', 'bytes_out', 'bytes_in'], examples: ['agentvm vms egress-log vm_… --limit 20'] },
  extension: true,
  params: IdParam,
  query: EgressLogQuery,
  success: { status: 200, schema: EgressLog, description: 'The log' },
  errors: ['not_found'],
  handler: async ({ services, principal, params, query }) => {
    const log = await services.vms.egressLog(principal.tenantId, params.id, query.limit);
    return { body: { data: log.data.map((e) => ({ ...e, at: iso(e.at) })), has_more: log.has_more } };
  },
});
