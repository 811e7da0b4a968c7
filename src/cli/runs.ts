/**
 * The commands that follow a run as it goes: `vms run` (queue, then stream its output and exit with
 * its exit code) and `runs logs` (replay, and with --follow go on until it ends). Ctrl-C on a run
 * being followed asks whether to cancel it or leave it running.
 */
import { Command, Option } from 'commander';
import { createInterface } from 'node:readline/promises';
import { call, resolveCredentials, type Schemas } from '../client/client.ts';
import { followRun, type Run, type RunOutput } from '../client/runEvents.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { print, type Out } from './output.ts';

/** How a finished run ends the command: its own exit code; 124 timed out (as timeout(1)), 130 cancelled, 125 lost. */
export function exitCodeOfRun(run: Run): number {
  if (run.status === 'timed_out') return 124;
  if (run.status === 'cancelled') return 130;
  if (run.status === 'lost') return 125;
  return run.exit_code ?? 1;
}

function explain(run: Run): void {
  const tail = `(run ${run.run_id})`;
  if (run.status === 'timed_out') process.stderr.write(`agentvm: the task timed out after ${run.duration_ms} ms ${tail}\n`);
  else if (run.status === 'cancelled') process.stderr.write(`agentvm: the run was cancelled ${tail}\n`);
  else if (run.status === 'lost') process.stderr.write(`agentvm: the VM went away under the run; what it printed is kept ${tail}\n`);
  else if (run.exit_code !== 0) process.stderr.write(`agentvm: the task exited with ${run.exit_code} ${tail}\n`);
}

const write = (out: RunOutput) => (out.stream === 'stdout' ? process.stdout : process.stderr).write(out.text);

/**
 * Follows a run to its end, printing as it comes. Ctrl-C: on a terminal, asks whether to cancel or
 * detach (a second Ctrl-C detaches); elsewhere it cancels.
 */
async function followWithInterrupt(vmId: string, runId: string, after: number, print: boolean): Promise<Run> {
  const { baseUrl, key } = await resolveCredentials();
  const abort = new AbortController();
  let detached = false;
  const onSigint = async () => {
    process.off('SIGINT', onSigint);
    let cancel = true;
    if (process.stdin.isTTY) {
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      rl.once('SIGINT', () => rl.close());
      const answer = await rl.question(`\ncancel run ${runId} [c], or leave it running and detach [d]? `).catch(() => 'd');
      rl.close();
      cancel = answer.trim().toLowerCase().startsWith('c');
    }
    if (cancel) {
      const api = await customerClient();
      await call(api.POST('/v1/api/vms/{id}/runs/{run_id}/cancel', { params: { path: { id: vmId, run_id: runId } } })).catch(() => undefined);
      process.once('SIGINT', () => ((detached = true), abort.abort()));
    } else {
      detached = true;
      abort.abort();
    }
  };
  process.on('SIGINT', onSigint);
  try {
    return await followRun({ baseUrl, key, vmId, runId, after, onOutput: print ? write : () => undefined, signal: abort.signal });
  } catch (err) {
    if (detached) {
      process.stderr.write(`agentvm: detached; the run goes on. Follow it with: agentvm runs logs ${vmId} ${runId} --follow\n`);
      process.exit(0);
    }
    throw err;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

export function vmsRun(cmd: Command): void {
  cmd
    .description("run one task with the VM's harness: streams its output as it comes and exits with its exit code")
    .argument('<vm_id>')
    .argument('<task...>')
    .option('--model <model>', 'model for the harness')
    .option('--provider <provider>', 'provider for the harness')
    .option('--detach', 'queue the run, print its id and return at once')
    .addOption(new Option('--json', 'print the finished run as JSON (no streaming)'))
    .addHelpText(
      'after',
      '\nCtrl-C asks whether to cancel the run or leave it running. Exit code: the task\'s; 124 timed out, 130 cancelled, 125 lost.' +
        '\nExamples:\n  agentvm vms run vm_… "add a test for the parser"\n  agentvm vms run vm_… --detach "long refactor"',
    )
    .action(apiAction(async (id: string, words: string[], o: Out & { model?: string; provider?: string; detach?: boolean }) => {
      const body: Schemas['RunTaskRequest'] = { task: words.join(' ') };
      if (o.model) body.model = o.model;
      if (o.provider) body.provider = o.provider;
      const api = await customerClient();
      const queued = (await call(api.POST('/v1/api/vms/{id}/run', { params: { path: { id }, header: { Prefer: 'respond-async' } }, body }))) as unknown as Run;
      if (o.detach) return print(queued, o, () => process.stdout.write(`${queued.run_id}\n`));
      const run = await followWithInterrupt(id, queued.run_id, 0, !o.json);
      if (o.json) print(run, o);
      else explain(run);
      process.exitCode = exitCodeOfRun(run);
    }));
}

export function runsLogs(cmd: Command): void {
  cmd
    .description("a run's output; with --follow, as it comes until the run ends (exit code: the run's)")
    .argument('<vm_id>')
    .argument('<run_id>')
    .option('-f, --follow', 'go on until the run ends')
    .addHelpText('after', '\nExample:\n  agentvm runs logs vm_… run_… --follow')
    .action(apiAction(async (vmId: string, runId: string, o: { follow?: boolean }) => {
      if (o.follow) {
        const run = await followWithInterrupt(vmId, runId, 0, true);
        explain(run);
        process.exitCode = exitCodeOfRun(run);
        return;
      }
      // What it printed so far, without waiting for the end.
      const api = await customerClient();
      const run = await call(api.GET('/v1/api/vms/{id}/runs/{run_id}', { params: { path: { id: vmId, run_id: runId } } }));
      process.stdout.write(run.stdout ?? '');
      process.stderr.write(run.stderr ?? '');
      if (run.status === 'queued') process.stderr.write('agentvm: the run is queued; nothing printed yet\n');
    }));
}

/** A task as one line of at most `max` characters, for tables. */
export const oneLine = (text: string, max: number) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** `runs get` shows a run's facts; its output is `runs logs`. */
export const renderRun = (run: Run): Record<string, unknown> => ({ run_id: run.run_id, vm_id: run.vm_id, status: run.status, harness: run.harness, exit_code: run.exit_code, duration_ms: run.duration_ms, created_at: run.created_at, finished_at: run.finished_at, task: oneLine(run.task, 80),
});
