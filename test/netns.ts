/**
 * Tests that let a VM reach out run in a network namespace of their own with nothing but loopback
 * (`unshare -n`), so that a mistake in the gateway cannot send a packet off this machine: the test
 * file runs itself again inside one, and its providers and test hosts are stand-ins on loopback.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const FLAG = 'AGENTVM_TEST_IN_NETNS';

/** Whether this process is the copy inside its own namespace. */
export const inOwnNetns = (): boolean => process.env[FLAG] === '1';

/** Why namespaces cannot be made here, or null when they can. */
export function netnsUnavailable(): string | null {
  const r = spawnSync('unshare', ['-n', 'true'], { stdio: 'ignore' });
  return r.status === 0 ? null : 'unshare -n is not permitted here (needs root or user namespaces)';
}

/** Node with `args`, in a new network namespace whose loopback is up, marked as the copy inside. */
export function spawnInOwnNetns(args: string[], stdio: StdioOptions, flag = FLAG): ChildProcess {
  // Without the test runner's own marker, or a test file's copy would skip its tests as a nested run.
  const env: NodeJS.ProcessEnv = { ...process.env, [flag]: '1' };
  delete env.NODE_TEST_CONTEXT;
  return spawn('unshare', ['-n', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...args], { env, stdio });
}

/**
 * Runs the test file `fileUrl` again inside a new network namespace whose loopback is up; answers its
 * exit code and everything it printed.
 */
export function runInOwnNetns(fileUrl: string, timeoutMs: number): Promise<{ code: number | null; output: string; passed: number }> {
  return new Promise((resolve) => {
    const child = spawnInOwnNetns(['--import', 'tsx', '--test', '--test-reporter=spec', fileURLToPath(fileUrl)], ['ignore', 'pipe', 'pipe']);
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output, passed: Number(/^ℹ pass (\d+)$/m.exec(output)?.[1] ?? 0) });
    });
  });
}

/**
 * The body of the outer test of a file that runs itself again in its own namespace (the test is
 * declared in that file, so the runner counts it there): the inner run's output on stderr, and its
 * failures (the runner's "failing tests" part, the start of it) in the assertion's message too, so
 * that a report that keeps only the failures still says why.
 */
export function inOwnNetnsRun(fileUrl: string, minutes: number): () => Promise<void> {
  return async () => {
    const { code, output, passed } = await runInOwnNetns(fileUrl, minutes * 60_000);
    process.stderr.write(output);
    const failures = output.slice(Math.max(0, output.lastIndexOf('✖ failing tests:'))).slice(0, 6000);
    assert.equal(code, 0, `the tests inside the namespace failed (their whole output is above):\n${failures}`);
    assert.ok(passed > 0, 'no test ran inside the namespace');
  };
}
