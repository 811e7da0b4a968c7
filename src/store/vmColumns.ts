/**
 * The values a VM row's columns hold: its statuses and desired states, and the plan, cycle or tier it
 * is billed by. Types and names only: the store, the domain and the front ends share them.
 */

/** The statuses a VM's row holds (the state machine over them: domain/vmState.ts). */
export const VM_STATUSES = [
  'provisioning',
  'running',
  'stopping',
  'stopped',
  'starting',
  'restarting',
  'reprovisioning',
  'failed',
  'suspending',
  'suspended',
] as const;
export type VmStatus = (typeof VM_STATUSES)[number] | 'deleted';
export type DesiredState = 'running' | 'stopped' | 'suspended' | 'deleted';

/** A VM's state columns. */
export interface VmStateFields {
  status: VmStatus;
  status_reason: string | null;
  desired_state: DesiredState;
  restart_requested: number;
  reprovision_requested: number;
}

/** The plan, cycle or tier a VM is billed by (their prices and sizes: domain/plans.ts). */
export type PlanId = 'starter' | 'pro' | 'max';
export type Cycle = 'monthly' | 'annual';
export type TierId = 'ondemand' | 'spot';
