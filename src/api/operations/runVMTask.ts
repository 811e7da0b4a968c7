import { defineOperation } from '../operation.ts';
import { IdParam, RunTaskRequest, RunTaskResult } from '../schemas.ts';
import { ApiError } from '../../domain/errors.ts';

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
  handler: async ({ services, principal, params }) => {
    const vm = await services.vms.get(principal.tenantId, params.id);
    if (vm.status !== 'running') {
      throw new ApiError('vm_not_running', `the VM is ${vm.status}`, 'start the VM and wait until it is running');
    }
    throw new ApiError('unavailable', 'the VM host cannot run tasks yet', 'try again later', { 'Retry-After': '30' });
  },
});
