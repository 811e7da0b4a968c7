/**
 * The agent's `exec`: one command run to its end, its output captured. Node built-ins only (the guest
 * agent is bundled alone).
 */
import { spawn } from 'node:child_process';
import type { ExecArgs, ExecResult } from '../wire/protocol.ts';

/** Runs argv directly (never through a shell) in its own process group, with a deadline and capped output. */
export function exec(args: ExecArgs): Promise<ExecResult> {
  if (!Array.isArray(args.argv) || args.argv.length === 0 || !args.argv.every((a) => typeof a === 'string')) {
    return Promise.reject(new Error('argv must be a non-empty array of strings'));
  }
  const max = args.max_output_bytes ?? 4 * 1024 * 1024;
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(args.argv[0], args.argv.slice(1), {
      cwd: args.cwd ?? '/',
      env: args.env ?? { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/root' },
      uid: args.uid,
      gid: args.gid,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const streams = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const kept = { stdout: 0, stderr: 0 };
    const dropped = { stdout: 0, stderr: 0 };
    for (const name of ['stdout', 'stderr'] as const) {
      child[name].on('data', (chunk: Buffer) => {
        const room = max - kept[name];
        if (room > 0) {
          const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
          streams[name].push(part);
          kept[name] += part.length;
        }
        dropped[name] += Math.max(0, chunk.length - Math.max(room, 0));
      });
    }
    let timedOut = false;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    const timer = args.timeout_ms ? setTimeout(() => ((timedOut = true), killGroup()), args.timeout_ms) : undefined;
    child.stdin.on('error', () => undefined);
    child.stdin.end(args.stdin ?? '');
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      killGroup(); // nothing the task started outlives it
      resolve({
        exit_code: code,
        signal,
        stdout: Buffer.concat(streams.stdout).toString('utf8'),
        stderr: Buffer.concat(streams.stderr).toString('utf8'),
        stdout_truncated_bytes: dropped.stdout,
        stderr_truncated_bytes: dropped.stderr,
        timed_out: timedOut,
        duration_ms: Date.now() - started,
      });
    };
    child.on('error', (err) => {
      streams.stderr.push(Buffer.from(`${err.message}\n`));
      finish(127, null);
    });
    child.on('close', (code, signal) => finish(code, signal));
  });
}
