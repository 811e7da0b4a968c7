import { defineOperation } from '../operation.ts';
import { IdParam, UpdateVmRequest, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';

export const updateVM = defineOperation({
  operationId: 'updateVM',
  method: 'patch',
  path: '/v1/api/vms/{id}',
  summary: "Change a VM's idle stop, expiry and auto-resume (extension)",
  description:
    'The body holds only `auto_stop_after_s`, `expires_at` and `auto_resume`; a field left out keeps its value, null clears it. ' +
    'Setting `auto_stop_after_s` starts the idle clock again. Activity is a run queued or running, an open shell, egress traffic or a preview request. ' +
    '`auto_resume`: a request to a preview URL of the suspended VM starts it and waits for it (≤ 30 s).',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_update', idempotent: true },
  extension: true,
  params: IdParam,
  body: { schema: UpdateVmRequest, required: true },
  success: { status: 200, schema: Vm, description: 'The VM with its new settings' },
  errors: ['not_found'],
  handler: async ({ services, principal, params, body }) => ({
    body: presentVm(await services.vms.updateTimers(principal.tenantId, params.id, body)),
  }),
});
