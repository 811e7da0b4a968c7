import { defineOperation, type Operation } from '../operation.ts';
import type { ErrorCode } from '../../domain/errors.ts';
import { IdParam, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';
import type { LifecycleAction } from '../../domain/vmState.ts';

/** stop, start, restart and reprovision share one shape: set the desired state, answer the VM. */
function lifecycleOperation(operationId: string, action: LifecycleAction, summary: string, extra: { errors?: ErrorCode[]; description?: string; extension?: boolean } = {}): Operation {
  return defineOperation({
    operationId,
    method: 'post',
    path: `/v1/api/vms/{id}/${action}`,
    summary,
    tag: 'VMs',
    audience: 'customer',
    params: IdParam,
    success: { status: 200, schema: Vm, description: 'The VM, with the transition it started' },
    ...(extra.description ? { description: extra.description } : {}),
    ...(extra.extension ? { extension: true } : {}),
    errors: ['not_found', ...(extra.errors ?? [])],
    handler: async ({ services, principal, params }) => ({
      body: presentVm(await services.vms.lifecycle(principal.tenantId, params.id, action)),
    }),
  });
}

export const stopVM = lifecycleOperation('stopVM', 'stop', 'Stop a VM: compute pauses, the persist disk stays');
export const startVM = lifecycleOperation('startVM', 'start', 'Start a stopped VM', { errors: ['quota_exceeded'] });
export const restartVM = lifecycleOperation('restartVM', 'restart', 'Restart a VM with a fresh root filesystem; the persist disk stays', { errors: ['quota_exceeded'] });
export const reprovisionVM = lifecycleOperation(
  'reprovisionVM',
  'reprovision',
  'Rebuild the guest from the current image; the persist disk stays',
  { errors: ['quota_exceeded'] },
);
export const suspendVM = lifecycleOperation('suspendVM', 'suspend', "Suspend a running VM with its memory: processes resume where they were on start", {
  errors: ['vm_not_running'],
  extension: true,
  description:
    "The VM's memory and device state are saved on its host and its QEMU exits (status `suspending`, then `suspended`); a suspended tier VM " +
    'draws no credits. `start` resumes it with its processes as they were, runs among them; stop, restart and reprovision discard the ' +
    'saved memory. Suspending a suspended VM changes nothing; any VM that is not running is refused (409 `vm_not_running`). Should the ' +
    'saved memory ever be unusable, the start boots the VM fresh from its disks and says so in `status_reason`.',
});
