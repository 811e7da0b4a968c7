import type { Clock } from './clock.ts';
import type { Db } from '../store/db.ts';
import { ApiError, invalid } from './errors.ts';
import type { VmService, VmRow } from './vms.ts';
import { buildInvocation, type TaskInput } from '../harness/invoke.ts';
import * as vmStore from '../store/vms.ts';
import type { ExecResult, RunArgs } from '../guest/protocol.ts';

/** What runs things inside a VM: the host's driver (in this process, or later on another host). */
export interface VmExecutor {
  /** Ids of the harnesses installed in the VM's guest; null when the VM is not up on its host. */
  harnesses(vmId: string): Promise<string[] | null>;
  run(vmId: string, args: RunArgs, timeoutMs: number): Promise<ExecResult>;
  /**
   * Sets (string) or removes (null) secrets: a harness's provider key is kept by the VM's host for its
   * gateway, the rest go into the guest. Answers the names the guest holds and those brokered.
   */
  setSecrets(vmId: string, set: Record<string, string | null>): Promise<SecretsOutcome>;
}

export interface SecretsOutcome {
  /** The secrets the guest now holds. */
  names: string[];
  /** The secrets the platform keeps for the gateway (never in the guest). */
  brokered: string[];
}

export interface RunLimits {
  timeoutMs: number;
  maxOutputBytes: number;
}

export interface RunResult {
  vm_id: string;
  harness: string;
  model: string | null;
  provider: string | null;
  exit_code: number | null;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  duration_ms: number;
  started_at: Date;
  finished_at: Date;
}

const notRunning = (vm: { status: string }) =>
  new ApiError('vm_not_running', `the VM is ${vm.status}`, 'start the VM and wait until it is running');

/** Runs one harness task in a VM; the VM's host runs them one at a time, in the order they came (host/runQueue.ts). */
export class RunService {
  /** `executor` reaches the guests (this process's host, or the VM's host from a replica); null where none is attached. */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly vms: VmService,
    private readonly limits: RunLimits,
    private readonly executor: VmExecutor | null = null,
  ) {}

  private async runningVm(tenantId: string, vmId: string): Promise<{ vm: VmRow; executor: VmExecutor; installed: string[] }> {
    const vm = await this.vms.get(tenantId, vmId);
    if (vm.status !== 'running') throw notRunning(vm);
    const executor = this.executor;
    if (!executor) throw new ApiError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });
    const installed = await executor.harnesses(vmId);
    if (!installed) throw notRunning({ status: 'not reachable on its host' });
    return { vm, executor, installed };
  }

  async run(tenantId: string, vmId: string, input: TaskInput): Promise<RunResult> {
    const { vm, executor, installed } = await this.runningVm(tenantId, vmId);
    const inv = buildInvocation(vm.harness, input, vm.brokered_secret_names);
    if (!installed.includes(vm.harness)) {
      throw invalid('harness', `harness ${vm.harness} is not installed in this VM's guest image, so it cannot run here`);
    }
    return this.runNow(vm, executor, inv, input);
  }

  private async runNow(vm: VmRow, executor: VmExecutor, inv: { argv: string[]; env: Record<string, string> }, input: TaskInput): Promise<RunResult> {
    let result: ExecResult;
    try {
      result = await executor.run(
        vm.vm_id,
        { argv: inv.argv, env: inv.env, timeout_ms: this.limits.timeoutMs, max_output_bytes: this.limits.maxOutputBytes },
        this.limits.timeoutMs + 60_000,
      );
    } catch (err) {
      if (err instanceof ApiError) throw err; // the host's own answer (its VM's queue is full, …)
      // The guest went away under the run (stopped, restarted, crashed): it is not running, or it
      // booted again meanwhile (a restart resumes in well under a second, before this check).
      const [now] = await this.db.query<{ status: string; boots: number }>('SELECT status, boots FROM vms WHERE vm_id = $1', [vm.vm_id]);
      const rebooted = now && now.boots !== vm.boots;
      if (!now || rebooted || now.status !== 'running' || (await executor.harnesses(vm.vm_id).catch(() => null)) === null) {
        throw new ApiError('vm_not_running', 'the VM stopped while the task ran', 'start the VM and run the task again');
      }
      // The guest runs on, but the run's answer was lost: its host's process restarted under it (an
      // API replica's call to it was cut). Like a guest that went away: the run did not finish here.
      throw new ApiError('vm_not_running', "the VM's host restarted while the task ran, so the run was lost", 'the task may have run in part; check the VM and run it again');
    }
    const finishedAt = this.clock.now();
    const note = (bytes: number) => (bytes > 0 ? `\n[agentvm: output truncated: ${bytes} more bytes were not kept]\n` : '');
    return {
      vm_id: vm.vm_id,
      harness: vm.harness,
      model: input.model ?? null,
      provider: input.provider ?? null,
      exit_code: result.exit_code,
      stdout: result.stdout + note(result.stdout_truncated_bytes),
      stderr: result.stderr + note(result.stderr_truncated_bytes),
      timed_out: result.timed_out,
      duration_ms: result.duration_ms,
      // When the guest started it: a run may have waited in its VM's queue before.
      started_at: new Date(finishedAt.getTime() - result.duration_ms),
      finished_at: finishedAt,
    };
  }

  /** Sets or removes the VM's harness credentials inside its guest; the VM keeps only their names. */
  async setSecrets(tenantId: string, vmId: string, set: Record<string, string | null>): Promise<VmRow> {
    const { executor } = await this.runningVm(tenantId, vmId);
    const { names, brokered } = await executor.setSecrets(vmId, set);
    return vmStore.setSecretNames(this.db, tenantId, vmId, names, brokered, this.clock.now());
  }
}
