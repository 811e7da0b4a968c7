import { defineOperation } from '../operation.ts';
import { IdParam, RunTaskRequest, RunTaskResult } from '../schemas.ts';

export const runVMTask = defineOperation({
  operationId: 'runVMTask',
  method: 'post',
  path: '/v1/api/vms/{id}/run',
  summary: "Run one headless task with the VM's harness",
  description: 'The server builds the command from the harness; the task is passed as one argument, never through a shell.',
  tag: 'VMs',
  audience: 'customer',
  params: IdParam,
  body: { schema: RunTaskRequest, required: true },
  success: { status: 200, schema: RunTaskResult, description: 'The finished run' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ services, principal, params, body }) => {
    const r = await services.runs.run(principal.tenantId, params.id, body);
    return { body: { ...r, started_at: r.started_at.toISOString(), finished_at: r.finished_at.toISOString() } };
  },
});
