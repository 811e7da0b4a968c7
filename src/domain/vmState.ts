/**
 * The VM state machine, as the API sees it. A lifecycle call only records what the customer wants
 * (desired state plus restart/reprovision requests) and shows the transition it started; the
 * reconciler does the work and writes the status it observes.
 */
export const VM_STATUSES = [
  'provisioning',
  'running',
  'stopping',
  'stopped',
  'starting',
  'restarting',
  'reprovisioning',
  'failed',
] as const;
export type VmStatus = (typeof VM_STATUSES)[number] | 'deleted';
export type DesiredState = 'running' | 'stopped' | 'deleted';
export type LifecycleAction = 'stop' | 'start' | 'restart' | 'reprovision';

export interface VmStateFields {
  status: VmStatus;
  status_reason: string | null;
  desired_state: DesiredState;
  restart_requested: number;
  reprovision_requested: number;
}

/** What a lifecycle call changes; null when the call is a no-op (stop on stopped, start on running). */
export function applyLifecycle(vm: VmStateFields, action: LifecycleAction): Partial<VmStateFields> | null {
  switch (action) {
    case 'stop':
      if (vm.desired_state === 'stopped' && (vm.status === 'stopped' || vm.status === 'stopping')) return null;
      if (vm.status === 'stopped' || vm.status === 'failed') {
        return { desired_state: 'stopped', status: 'stopped', status_reason: vm.status === 'failed' ? vm.status_reason : null };
      }
      return { desired_state: 'stopped', status: 'stopping', status_reason: null };
    case 'start':
      if (vm.desired_state === 'running' && vm.status !== 'stopped' && vm.status !== 'failed' && vm.status !== 'stopping') {
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
