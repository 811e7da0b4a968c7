/**
 * The VM state machine, as the API sees it. A lifecycle call only records what the customer wants
 * (desired state plus restart/reprovision requests) and shows the transition it started; the
 * reconciler does the work and writes the status it observes.
 */
import { VM_STATUSES, type DesiredState, type VmStateFields, type VmStatus } from '../store/vmColumns.ts';

export { VM_STATUSES, type DesiredState, type VmStateFields, type VmStatus };
export type LifecycleAction = 'stop' | 'start' | 'restart' | 'reprovision' | 'suspend';

/**
 * Statuses a VM rests in until something is asked of it. `failed` is one: a VM its host cannot boot
 * becomes failed (the contract, section 2) and stays so until a start, restart or reprovision.
 */
export const RESTING = ['running', 'stopped', 'suspended', 'failed'] as const satisfies readonly VmStatus[];
/** Statuses on the way to a resting one: they change by themselves soon. */
export const TRANSITIONAL = ['provisioning', 'stopping', 'starting', 'restarting', 'reprovisioning', 'suspending'] as const satisfies readonly VmStatus[];
export const isResting = (status: string): boolean => (RESTING as readonly string[]).includes(status);
export const isTransitional = (status: string): boolean => (TRANSITIONAL as readonly string[]).includes(status);

/** The statuses a wait may wait for, and the one each lifecycle action leads to. */
export type WaitTarget = 'running' | 'stopped' | 'suspended';
export const ACTION_TARGET: Record<LifecycleAction, WaitTarget> = {
  stop: 'stopped',
  start: 'running',
  restart: 'running',
  reprovision: 'running',
  suspend: 'suspended',
};

/**
 * The lifecycle actions that change something in a status, in the order a person looks for them
 * (every call is accepted; the others are no-ops or refused, see applyLifecycle and canSuspend).
 */
export function actionsFor(status: string): LifecycleAction[] {
  if (status === 'running') return ['suspend', 'stop', 'restart', 'reprovision'];
  if (status === 'suspended') return ['start', 'stop', 'restart', 'reprovision'];
  if (status === 'stopped' || status === 'failed') return ['start', 'restart', 'reprovision'];
  return ['stop'];
}

/** Whether a suspend may be asked for: the VM runs (or is suspended already: a no-op). */
export function canSuspend(vm: VmStateFields): boolean {
  return vm.desired_state === 'suspended' || (vm.desired_state === 'running' && vm.status === 'running');
}

/**
 * What a lifecycle call changes; null when the call is a no-op (stop on stopped, start on running,
 * suspend on suspended). Stop, restart and reprovision of a suspended VM discard its saved memory (its
 * host does); start resumes it. Suspend is only for a running VM (see canSuspend).
 */
export function applyLifecycle(vm: VmStateFields, action: LifecycleAction): Partial<VmStateFields> | null {
  switch (action) {
    case 'suspend':
      if (vm.desired_state === 'suspended' || !canSuspend(vm)) return null;
      return { desired_state: 'suspended', status: 'suspending', status_reason: null };
    case 'stop':
      if (vm.desired_state === 'stopped' && (vm.status === 'stopped' || vm.status === 'stopping')) return null;
      if (vm.status === 'stopped' || vm.status === 'failed') {
        return { desired_state: 'stopped', status: 'stopped', status_reason: vm.status === 'failed' ? vm.status_reason : null };
      }
      return { desired_state: 'stopped', status: 'stopping', status_reason: null };
    case 'start':
      if (vm.desired_state === 'running' && vm.status !== 'stopped' && vm.status !== 'failed' && vm.status !== 'stopping' && vm.status !== 'suspended') {
        return null;
      }
      return { desired_state: 'running', status: vm.status === 'provisioning' ? 'provisioning' : 'starting', status_reason: null };
    case 'restart':
      return {
        desired_state: 'running',
        status: vm.status === 'provisioning' ? 'provisioning' : 'restarting',
        status_reason: null,
        restart_requested: vm.restart_requested + 1,
      };
    case 'reprovision':
      return {
        desired_state: 'running',
        status: 'reprovisioning',
        status_reason: null,
        reprovision_requested: vm.reprovision_requested + 1,
      };
  }
}
