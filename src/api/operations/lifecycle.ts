import { defineOperation, type Operation } from '../operation.ts';
import { IdParam, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';
import type { LifecycleAction } from '../../domain/vmState.ts';

/** stop, start, restart and reprovision share one shape: set the desired state, answer the VM. */
function lifecycleOperation(operationId: string, action: LifecycleAction, summary: string): Operation {
  return defineOperation({
    operationId,
    method: 'post',
    path: `/v1/api/vms/{id}/${action}`,
    summary,
    tag: 'VMs',
    audience: 'customer',
    params: IdParam,
    success: { status: 200, schema: Vm, description: 'The VM, with the transition it started' },
    errors: ['not_found'],
    handler: async ({ services, principal, params }) => ({
      body: presentVm(await services.vms.lifecycle(principal.tenantId, params.id, action)),
    }),
  });
}

export const stopVM = lifecycleOperation('stopVM', 'stop', 'Stop a VM: compute pauses, the persist disk stays');
export const startVM = lifecycleOperation('startVM', 'start', 'Start a stopped VM');
export const restartVM = lifecycleOperation('restartVM', 'restart', 'Restart a VM with a fresh root filesystem; the persist disk stays');
export const reprovisionVM = lifecycleOperation(
  'reprovisionVM',
  'reprovision',
  'Rebuild the guest from the current image; the persist disk stays',
);
