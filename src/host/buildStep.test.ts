/**
 * A build step's output streamed line by line (buildStep.ts), with this machine's shell standing in
 * for the builder VM's exec (the same /bin/sh, tail and base64 the guest has): lines reach the log
 * while the step still runs, the cap counts what it cuts, the exit code is the step's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExecArgs, ExecResult } from '../wire/protocol.ts';
import { runStreamed, splitLines, type BuilderExec } from './buildStep.ts';

/** The guest agent's exec, on this machine. */
const localExec: BuilderExec = (args: ExecArgs) =>
  new Promise((resolve) => {
    const child = spawn(args.argv[0], args.argv.slice(1), { cwd: args.cwd ?? '/', env: args.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.stdin.on('error', () => undefined);
    child.stdin.end(args.stdin ?? '');
    const t0 = Date.now();
    child.on('close', (code, signal) =>
      resolve({ exit_code: code, signal, stdout, stderr, stdout_truncated_bytes: 0, stderr_truncated_bytes: 0, timed_out: false, duration_ms: Date.now() - t0 } satisfies ExecResult),
    );
  });

test('lines split on newlines across reads; a partial line is held, a multi-byte character split between reads is whole', () => {
  const euro = Buffer.from('€');
  const a = splitLines(Buffer.alloc(0), Buffer.concat([Buffer.from('one\r\ntw'), euro.subarray(0, 1)]));
  assert.deepEqual(a.lines, ['one']);
  const b = splitLines(a.rest, Buffer.concat([euro.subarray(1), Buffer.from('o\nthree')]));
  assert.deepEqual(b.lines, ['tw€o']);
  assert.equal(b.rest.toString(), 'three');
});

test('a step streams its lines while it runs, stdout and stderr together; its exit code and tail are its own', { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-step-'));
  try {
    const got: Array<{ text: string; at: number }> = [];
    const gate = path.join(dir, 'gate');
    // The step waits for a file the test makes only once the first line has reached it.
    const script = `echo first; echo to-stderr >&2; printf '10%%\\r50%%\\r100%%\\n'; until [ -e ${gate} ]; do sleep 0.05; done; echo last; exit 7`;
    const outcome = await runStreamed(
      localExec,
      { argv: ['/bin/sh', '-c', script], cwd: dir, env: { PATH: process.env.PATH! }, ids: { uid: process.getuid!(), gid: process.getgid!() }, timeoutMs: 30_000, capBytes: 1024, name: 'line3', dir },
      async (text) => {
        got.push({ text, at: Date.now() });
        if (text === 'first') await import('node:fs/promises').then((fs) => fs.writeFile(gate, ''));
      },
      50,
    );
    assert.deepEqual(got.map((g) => g.text), ['first', 'to-stderr', '100%', 'last']);
    assert.equal(outcome.exitCode, 7);
    assert.deepEqual(outcome.tail, ['first', 'to-stderr', '100%', 'last']);
    assert.equal(outcome.droppedBytes, 0);
    assert.ok(!existsSync(path.join(dir, 'line3.out')), "the step's files are removed");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('past the cap the rest is counted, not kept, and the step still runs to its end', { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-step-'));
  try {
    const lines: string[] = [];
    const outcome = await runStreamed(
      localExec,
      { argv: ['/bin/sh', '-c', `for i in $(seq 1 200); do echo "line $i of the output"; done; touch ${dir}/ran-to-the-end`], cwd: dir, env: { PATH: process.env.PATH! }, ids: { uid: process.getuid!(), gid: process.getgid!() }, timeoutMs: 30_000, capBytes: 100, name: 'cap', dir },
      async (t) => void lines.push(t),
      50,
    );
    assert.equal(outcome.exitCode, 0, JSON.stringify(outcome));
    assert.deepEqual(lines, ['line 1 of the output', 'line 2 of the output', 'line 3 of the output', 'line 4 of the output', 'line 5 of the ou'], 'the first 100 bytes, the last line cut');
    assert.ok(outcome.droppedBytes > 3000, String(outcome.droppedBytes));
    assert.ok(existsSync(path.join(dir, 'ran-to-the-end')));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a step that prints little is one exec: its output and status come back with it; more than that is read from its file', { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-step-'));
  try {
    let execs = 0;
    const counted: BuilderExec = (args, ms) => (execs++, localExec(args, ms));
    const step = (name: string, script: string, capBytes: number) => ({ argv: ['/bin/sh', '-c', script], cwd: dir, env: { PATH: process.env.PATH! }, ids: { uid: process.getuid!(), gid: process.getgid!() }, timeoutMs: 30_000, capBytes, name, dir });
    const small: string[] = [];
    const a = await runStreamed(counted, step('small', 'echo one; echo two >&2; exit 3', 1024), async (t) => void small.push(t), 10_000);
    assert.deepEqual(small, ['one', 'two']);
    assert.equal(a.exitCode, 3);
    assert.equal(execs, 1);
    assert.deepEqual((await readdir(dir)).filter((n) => n.startsWith('small.')), [], "the step's files are removed");
    // 3000 lines (about 60 KiB: more than comes back whole), all kept under a cap of 100 KB.
    const big: string[] = [];
    const b = await runStreamed(counted, step('big', 'seq 1 3000 | sed "s/^/line of the output /"', 100_000), async (t) => void big.push(t), 10_000);
    assert.equal(b.exitCode, 0);
    assert.equal(big.length, 3000);
    assert.equal(big[2999], 'line of the output 3000');
    assert.equal(b.droppedBytes, 0);
    assert.deepEqual((await readdir(dir)).filter((n) => n.startsWith('big.')), [], "the step's files are removed");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
