import type { Clock } from './clock.ts';
import type { Db } from '../store/db.ts';
import { DomainError, invalid, notFound } from './errors.ts';
import type { VmService, VmRow } from './vms.ts';
import { buildInvocation, type TaskInput } from '../harness/invoke.ts';
import * as vmStore from '../store/vms.ts';
import * as runStore from '../store/runs.ts';
import { isFinished, type RunEventRow, type RunRow } from '../store/runs.ts';
import { newId } from './ids.ts';
import type { RunFeed, RunNews } from '../feeds/runFeed.ts';
import { recordRunFinished } from './events.ts';

/** What runs things inside a VM: the host's side (in this process, or the VM's host from a replica). */
export interface VmExecutor {
  /** Ids of the harnesses installed in the VM's guest; null when the VM is not up on its host. */
  harnesses(vmId: string): Promise<string[] | null>;
  /** Runs of the VM were queued: its host starts the next soon (it also looks every second). */
  kickRuns(vmId: string): void;
  /** Kills a running run's process group in its guest; the end is recorded as `cancelled`. */
  cancelRun(vmId: string, runId: string): Promise<void>;
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
  /** Runs that may wait behind the one running on a VM; more are refused (429). */
  maxQueued: number;
}

/** One thing a follower of a run sees: a piece of output, then the finished run. */
export type RunEvent = ({ type: 'stdout' | 'stderr' } & { seq: number; text: string }) | { type: 'end'; run: RunRow };

const notRunning = (vm: { status: string }) =>
  new DomainError('vm_not_running', `the VM is ${vm.status}`, 'start the VM and wait until it is running');

/** How often a follower looks at the database even without news (news from another process may be lost). */
const POLL_MS = 2000;

/**
 * Runs of harness tasks in VMs, as records: queued here (any replica), started in order and recorded
 * by the VM's host (host/runRecorder.ts), followed from the database and the feed.
 */
export class RunService {
  /** `executor` reaches the guests (this process's host, or the VM's host from a replica); null where none is attached. */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly vms: VmService,
    private readonly feed: RunFeed,
    private readonly limits: RunLimits,
    private readonly executor: VmExecutor | null = null,
  ) {}

  private async runningVm(tenantId: string, vmId: string): Promise<{ vm: VmRow; executor: VmExecutor; installed: string[] }> {
    const vm = await this.vms.get(tenantId, vmId);
    if (vm.status !== 'running') throw notRunning(vm);
    const executor = this.executor;
    if (!executor) throw new DomainError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });
    const installed = await executor.harnesses(vmId);
    if (!installed) throw notRunning({ status: 'not reachable on its host' });
    return { vm, executor, installed };
  }

  /** Queues a run of the task; the VM's host starts it when the runs before it have ended. */
  async start(tenantId: string, vmId: string, input: TaskInput): Promise<RunRow> {
    const { vm, executor, installed } = await this.runningVm(tenantId, vmId);
    const inv = buildInvocation(vm.harness, input, vm.brokered_secret_names);
    if (!installed.includes(vm.harness)) {
      throw invalid('harness', `harness ${vm.harness} is not installed in this VM's guest image, so it cannot run here`);
    }
    const run: RunRow & { boots: number } = {
      run_id: newId('run'),
      vm_id: vmId,
      status: 'queued',
      task: input.task,
      harness: vm.harness,
      model: input.model ?? null,
      provider: input.provider ?? null,
      exit_code: null,
      stdout: null,
      stderr: null,
      timed_out: null,
      duration_ms: null,
      status_reason: null,
      last_seq: 0,
      first_output_ms: null,
      created_at: this.clock.now(),
      started_at: null,
      finished_at: null,
      boots: 0,
    };
    await this.db.transaction(async (tx) => {
      // One queue per VM: its row's lock orders the count and the insert of concurrent requests.
      const locked = await runStore.lockQueue(tx, vmId);
      if (locked.status !== 'running') throw notRunning(locked);
      if (locked.queued >= this.limits.maxQueued) {
        throw new DomainError('rate_limited', `this VM already has ${locked.queued} runs waiting`, 'retry when a run has finished', { 'Retry-After': '5' });
      }
      run.boots = locked.boots;
      await runStore.insert(tx, {
        ...run,
        tenant_id: tenantId,
        argv: inv.argv,
        env: inv.env,
        timeout_ms: this.limits.timeoutMs,
        max_output_bytes: this.limits.maxOutputBytes,
      });
    });
    executor.kickRuns(vmId);
    const { boots: _, ...row } = run;
    return row;
  }

  /** Queues a run and waits for its end. A run its guest lost answers 409 (the VM went away under it). */
  async run(tenantId: string, vmId: string, input: TaskInput): Promise<RunRow> {
    const queued = await this.start(tenantId, vmId, input);
    const run = await this.waitFor(queued.run_id, this.limits.timeoutMs + 60_000);
    if (run.status === 'lost') {
      throw new DomainError('vm_not_running', `${run.status_reason ?? 'the VM went away under the run'} (run ${run.run_id})`, 'start the VM and run the task again; what it printed is kept in the run');
    }
    return run;
  }

  async get(tenantId: string, vmId: string, runId: string): Promise<RunRow> {
    await this.vms.get(tenantId, vmId);
    const run = await runStore.get(this.db, tenantId, vmId, runId);
    if (!run) throw notFound('run');
    return run;
  }

  async list(tenantId: string, vmId: string, limit: number, offset: number): Promise<{ rows: RunRow[]; total: number }> {
    await this.vms.get(tenantId, vmId);
    return runStore.list(this.db, tenantId, vmId, limit, offset);
  }

  /** Cancels a queued run at once, a running one by killing its process group; a finished run is answered as it is. */
  async cancel(tenantId: string, vmId: string, runId: string): Promise<RunRow> {
    const run = await this.get(tenantId, vmId, runId);
    if (isFinished(run.status)) return run;
    const now = this.clock.now();
    const cancelled = await this.db.transaction(async (tx) => {
      const ended = await runStore.cancelQueued(tx, tenantId, runId, now);
      if (ended) await recordRunFinished(tx, runId, now);
      return ended;
    });
    if (cancelled) {
      await this.feed.publish({ run_id: runId, finished: true });
      return (await runStore.byId(this.db, runId))!;
    }
    if (!this.executor) throw new DomainError('unavailable', 'no VM host is attached to this server', 'try again later', { 'Retry-After': '30' });
    await this.executor.cancelRun(vmId, runId).catch((err: Error) => {
      throw err instanceof DomainError ? err : notRunning({ status: 'not reachable on its host' });
    });
    return this.waitFor(runId, 10_000);
  }

  /** The run once it has ended, or as it is after `ms`. */
  async waitFor(runId: string, ms: number): Promise<RunRow> {
    // News with events is output as it comes: only the end (or news from another process) can end the wait.
    return this.feed.until(
      runId,
      async () => {
        const run = (await runStore.byId(this.db, runId))!;
        return { over: isFinished(run.status), value: run };
      },
      { ms, pollMs: POLL_MS, wakes: (news) => news.events === undefined },
    );
  }

  /**
   * Checks where a follower would start: `lastEventId` (the last event it saw) must be a number no
   * further than the run has come. Answers the run.
   */
  async beginFollowing(tenantId: string, vmId: string, runId: string, lastEventId: string | undefined): Promise<{ run: RunRow; after: number }> {
    const run = await this.get(tenantId, vmId, runId);
    if (lastEventId === undefined) return { run, after: 0 };
    if (!/^\d{1,10}$/.test(lastEventId.trim())) throw invalid('Last-Event-ID', 'must be the id of an event of this run (a whole number)');
    const after = Number(lastEventId.trim());
    if (after > run.last_seq) throw invalid('Last-Event-ID', `is ahead of the run: its last event so far is ${run.last_seq}`);
    return { run, after };
  }

  /**
   * Calls `send` with each event after `after`, in order, as it is stored; then with the finished run,
   * and returns. Stops early when `signal` aborts.
   */
  async follow(runId: string, after: number, send: (e: RunEvent) => Promise<void> | void, signal: AbortSignal): Promise<void> {
    let cursor = after;
    const inbox: RunEventRow[] = [];
    let readDb = true;
    let wake: (() => void) | null = null;
    const onNews = (news: RunNews) => {
      if (news.events) inbox.push(...news.events);
      else readDb = true; // a start, an end, or news from another process: read the rows
      wake?.();
    };
    const stop = this.feed.watch(runId, onNews);
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    const emit = async (e: RunEventRow) => {
      cursor = e.seq;
      await send({ type: e.stream, seq: e.seq, text: e.text });
    };
    try {
      while (!signal.aborted) {
        // What the feed brought, while it follows on without a gap; else the rows.
        const news = inbox.splice(0);
        for (const e of news) {
          if (e.seq <= cursor) continue;
          if (e.seq !== cursor + 1) {
            readDb = true;
            break;
          }
          await emit(e);
        }
        if (readDb) {
          readDb = false;
          for (;;) {
            const rows = await runStore.eventsAfter(this.db, runId, cursor, 500);
            for (const e of rows) await emit(e);
            if (rows.length < 500 || signal.aborted) break;
          }
          const run = await runStore.byId(this.db, runId);
          if (!run) return;
          if (isFinished(run.status)) {
            // Anything stored before the end that this follower has not seen yet.
            for (const e of await runStore.eventsAfter(this.db, runId, cursor, 1_000_000)) await emit(e);
            await send({ type: 'end', run });
            return;
          }
        }
        if (inbox.length || readDb) continue;
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(() => {
            readDb = true;
            resolve();
          }, POLL_MS);
        });
        wake = null;
      }
    } finally {
      stop();
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Sets or removes the VM's harness credentials inside its guest; the VM keeps only their names. */
  async setSecrets(tenantId: string, vmId: string, set: Record<string, string | null>): Promise<VmRow> {
    const { executor } = await this.runningVm(tenantId, vmId);
    const { names, brokered } = await executor.setSecrets(vmId, set);
    await vmStore.setSecretNames(this.db, tenantId, vmId, names, brokered, this.clock.now());
    return this.vms.get(tenantId, vmId);
  }
}
