import { defineOperation } from '../operation.ts';
import { IdParam, Vm, VmWaitQuery } from '../schemas.ts';
import { presentVm } from '../present.ts';

export const waitVM = defineOperation({
  operationId: 'waitVM',
  method: 'get',
  path: '/v1/api/vms/{id}/wait',
  summary: 'Wait until a VM has a status, then answer it (extension)',
  description:
    'Answers the VM as soon as its `status` is the one asked for, or `failed`, or another status it rests in ' +
    '(`running`, `stopped`, `suspended`) while nothing asked of it leads to the one asked for (a suspend that ' +
    'failed leaves the VM `running`). After `timeout_s` it answers the VM as it is then: compare its `status`. ' +
    'A VM destroyed meanwhile is 404. The server hears of the change when it is committed, so a client that ' +
    'waits learns of it at once and sends one request, not one every few hundred milliseconds.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_wait' },
  cli: { command: 'vms wait', examples: ['agentvm vms wait vm_… --status running --timeout-s 60'] },
  extension: true,
  params: IdParam,
  query: VmWaitQuery,
  success: { status: 200, schema: Vm, description: 'The VM, once the wait is over or its time is up' },
  errors: ['not_found'],
  handler: async ({ c, services, principal, params, query }) => ({
    body: presentVm(await services.vms.waitFor(principal.tenantId, params.id, query.status, query.timeout_s * 1000, c.req.raw.signal)),
  }),
});
