/** `--wait`: wait for a VM's transition to be done (GET …/wait), with a spinner and the elapsed time on stderr. */
import type { Command } from 'commander';
import { createSpinner } from 'nanospinner';
import { call, ClientError, type ApiClient, type Schemas } from '../client/client.ts';
import { isResting, type WaitTarget } from '../domain/vmState.ts';

export type { WaitTarget };

export const addWaitOptions = (cmd: Command) =>
  cmd.option('--wait', 'wait until the transition is done, with a spinner').option('--timeout <seconds>', 'how long --wait waits', '600');

/**
 * Waits until the VM reaches `target` (or fails): each request waits on the server for up to 10 s
 * (GET /v1/api/vms/{id}/wait), so the answer comes as soon as the VM changes.
 */
export async function waitForVm(api: ApiClient, vmId: string, target: WaitTarget, timeoutS: number): Promise<Schemas['VM']> {
  const started = Date.now();
  const spinner = createSpinner(`${vmId}: waiting for ${target}`, { stream: process.stderr }).start();
  try {
    for (;;) {
      const left = Math.ceil(timeoutS - (Date.now() - started) / 1000);
      const vm = await call(
        api.GET('/v1/api/vms/{id}/wait', { params: { path: { id: vmId }, query: { status: target, timeout_s: Math.max(1, Math.min(10, left)) } } }),
      );
      const elapsed = ((Date.now() - started) / 1000).toFixed(1);
      if (vm.status === target) {
        spinner.success({ text: `${vmId}: ${vm.status} after ${elapsed} s${vm.ipv4 ? ` (${vm.ipv4})` : ''}` });
        return vm;
      }
      if (vm.status === 'failed') {
        spinner.error({ text: `${vmId}: failed after ${elapsed} s: ${vm.status_reason ?? ''}` });
        throw new ClientError('vm_failed', `the VM failed: ${vm.status_reason ?? 'no reason given'}`);
      }
      if (target === 'suspended' && vm.status === 'running') {
        // Back to running after `suspending`: the suspend failed and the guest ran on.
        spinner.error({ text: `${vmId}: not suspended: ${vm.status_reason ?? ''}` });
        throw new ClientError('suspend_failed', `the VM was not suspended: ${vm.status_reason ?? 'no reason given'}`);
      }
      if (isResting(vm.status)) {
        // The server's wait is over short of the target: the VM rests elsewhere (stopped meanwhile, say).
        spinner.error({ text: `${vmId}: ${vm.status} after ${elapsed} s` });
        throw new ClientError('unexpected_status', `the VM is ${vm.status}, and nothing asked of it leads to ${target}`, 'check `agentvm vms get`');
      }
      if (Date.now() - started > timeoutS * 1000) {
        spinner.error({ text: `${vmId}: still ${vm.status} after ${elapsed} s` });
        throw new ClientError('timeout', `the VM did not reach ${target} within ${timeoutS} s`, 'check `agentvm vms get`');
      }
      spinner.update({ text: `${vmId}: ${vm.status}, ${elapsed} s` });
    }
  } finally {
    spinner.stop();
  }
}
