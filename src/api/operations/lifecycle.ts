import { defineOperation, type McpHints, type Operation } from '../operation.ts';
import type { ErrorCode } from '../../domain/errors.ts';
import { IdParam, Vm } from '../schemas.ts';
import { presentVm } from '../present.ts';
import { ACTION_TARGET, type LifecycleAction } from '../../domain/vmState.ts';

/**
 * The lifecycle operations share one shape: set the desired state, answer the VM. Each is the MCP tool
 * `vm_<action>` and the command `vms <action>`, whose --wait waits for the status the action leads to.
 */
function lifecycleOperation(
  operationId: string,
  action: LifecycleAction,
  summary: string,
  extra: { errors?: ErrorCode[]; description?: string; extension?: boolean; mcp?: McpHints } = {},
): Operation {
  return defineOperation({
    operationId,
    method: 'post',
    path: `/v1/api/vms/{id}/${action}`,
    summary,
    tag: 'VMs',
    audience: 'customer',
    mcp: { tool: `vm_${action}`, ...extra.mcp },
    cli: { command: `vms ${action}`, waitFor: ACTION_TARGET[action] },
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

export const stopVM = lifecycleOperation('stopVM', 'stop', 'Stop a VM: compute pauses, the persist disk stays', { mcp: { destructive: true, idempotent: true } });
export const startVM = lifecycleOperation('startVM', 'start', 'Start a stopped VM', { errors: ['quota_exceeded'], mcp: { idempotent: true } });
export const restartVM = lifecycleOperation('restartVM', 'restart', 'Restart a VM with a fresh root filesystem; the persist disk stays', {
  errors: ['quota_exceeded'],
  mcp: { destructive: true },
});
export const reprovisionVM = lifecycleOperation(
  'reprovisionVM',
  'reprovision',
  'Rebuild the guest from the current image; the persist disk stays',
  { errors: ['quota_exceeded'], mcp: { destructive: true } },
);
export const suspendVM = lifecycleOperation('suspendVM', 'suspend', "Suspend a running VM with its memory: processes resume where they were on start", {
  errors: ['vm_not_running'],
  extension: true,
  mcp: { idempotent: true },
  description:
    "The VM's memory and device state are saved on its host and its QEMU exits (status `suspending`, then `suspended`); a suspended tier VM " +
    'draws no credits. `start` resumes it with its processes as they were, runs among them; stop, restart and reprovision discard the ' +
    'saved memory. Suspending a suspended VM changes nothing; any VM that is not running is refused (409 `vm_not_running`). Should the ' +
    'saved memory ever be unusable, the start boots the VM fresh from its disks and says so in `status_reason`.',
});
