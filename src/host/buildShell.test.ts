/**
 * The shell of a build's RUN steps (buildShell.ts), with a process of this machine standing in for the
 * builder's agent (the frames guest/process.ts sends and takes: `P`, `O`, `E`, `X` from it; `D` its
 * stdin, `C` its end and `K` a signal to its group, to it) and this machine's /bin/sh as the shell:
 * lines reach the log while the step still runs, the cap counts what it cuts, the exit code is the
 * step's, a timeout kills it, and steps in one shell see nothing of each other but the files they
 * write. The same on a real builder VM: test/images.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { GuestShell, ShellEnd } from '../domain/guestAccess.ts';
import type { ProcessOpen } from '../wire/protocol.ts';
import { processFrame, ProcessFrameReader } from '../wire/processFrames.ts';
import { BuildShell, splitLines, type BuilderProcess, type StreamedStep } from './buildShell.ts';

/** The builder's agent starting a program on a stream, on this machine. */
const localProcess: BuilderProcess = async (p: ProcessOpen) => {
  const child = spawn(p.argv[0], p.argv.slice(1), { cwd: p.cwd ?? '/', env: p.env, stdio: [p.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'], detached: true });
  let sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  const early: Buffer[] = [];
  const send = (b: Buffer) => (sink ? sink(b, () => undefined) : early.push(b));
  send(processFrame('P', Buffer.from(String(child.pid))));
  child.stdout!.on('data', (c: Buffer) => send(processFrame('O', c)));
  child.stderr!.on('data', (c: Buffer) => send(processFrame('E', c)));
  child.stdin?.on('error', () => undefined);
  const ended = new Promise<ShellEnd>((resolve) =>
    child.on('close', (code, signal) => {
      send(processFrame('X', Buffer.from(String(signal ? os.constants.signals[signal] : (code ?? 0) << 8))));
      resolve({ kind: 'exit', exit_code: code, signal });
    }),
  );
  const input = new ProcessFrameReader();
  const shell: GuestShell = {
    framed: true,
    ended,
    write: async (bytes) => {
      // `K`: no bytes, the signal's number where a length would be.
      if (bytes[0] === 'K'.charCodeAt(0)) return void process.kill(-child.pid!, Number.parseInt(bytes.subarray(1, 9).toString(), 16));
      for (const f of input.push(bytes)) if (f.type === 'D') child.stdin?.write(f.data);
    },
    resize: () => undefined,
    output: (fn) => {
      sink = fn;
      for (const b of early.splice(0)) fn(b, () => undefined);
    },
    close: () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGHUP');
    },
  };
  return shell;
};

/** One step in a shell of its own. */
async function runOne(s: StreamedStep, line: (text: string) => Promise<void>) {
  const shell = await BuildShell.open(localProcess, s.env);
  try {
    return await shell.run(s, line);
  } finally {
    shell.close();
  }
}

/** Runs `fn` in a new folder of this machine's temporary folder, removed after. */
async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-step-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const step = (dir: string, script: string, more: Partial<StreamedStep> = {}): StreamedStep => ({
  argv: ['/bin/sh', '-c', script],
  cwd: dir,
  env: { PATH: process.env.PATH! },
  ids: { uid: 0, gid: 0 },
  timeoutMs: 30_000,
  capBytes: 1024,
  ...more,
});

test('lines split on newlines across reads; a partial line is held, a multi-byte character split between reads is whole', () => {
  const euro = Buffer.from('€');
  const a = splitLines(Buffer.alloc(0), Buffer.concat([Buffer.from('one\r\ntw'), euro.subarray(0, 1)]));
  assert.deepEqual(a.lines, ['one']);
  const b = splitLines(a.rest, Buffer.concat([euro.subarray(1), Buffer.from('o\nthree')]));
  assert.deepEqual(b.lines, ['tw€o']);
  assert.equal(b.rest.toString(), 'three');
});

test('a step streams its lines while it runs, stdout and stderr; its exit code and tail are its own; its WORKDIR is made', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const got: string[] = [];
    const gate = path.join(dir, 'gate');
    // The step waits for a file the test makes only once the first line has reached it.
    const script = `echo first; echo to-stderr >&2; printf '10%%\\r50%%\\r100%%\\n'; until [ -e ${gate} ]; do sleep 0.05; done; pwd; printf last; exit 7`;
    const workdir = path.join(dir, 'app', 'src');
    const mark = path.join(dir, 'mark');
    const outcome = await runOne(step(workdir, script, { sync: true, mark }), async (text) => {
      got.push(text);
      if (text === 'first') await writeFile(gate, '');
    });
    // The mark was made before the step wrote anything (the build's packages are listed only when newer).
    assert.ok((await stat(mark)).mtimeMs <= (await stat(gate)).mtimeMs);
    assert.deepEqual(got.filter((t) => t !== 'to-stderr'), ['first', '100%', workdir, 'last']);
    assert.ok(got.includes('to-stderr'));
    assert.equal(outcome.exitCode, 7);
    assert.deepEqual(outcome.tail.filter((t) => t !== 'to-stderr'), ['first', '100%', workdir, 'last']);
    assert.equal(outcome.droppedBytes, 0);
    assert.equal(outcome.timedOut, false);
  }));

test('past the cap the rest is counted, not kept, and the step still runs to its end; the tail is the real end', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const lines: string[] = [];
    const outcome = await runOne(step(dir, `for i in $(seq 1 200); do echo "line $i of the output"; done; touch ${dir}/ran-to-the-end`, { capBytes: 100 }), async (t) => void lines.push(t));
    assert.equal(outcome.exitCode, 0, JSON.stringify(outcome));
    assert.deepEqual(lines, ['line 1 of the output', 'line 2 of the output', 'line 3 of the output', 'line 4 of the output', 'line 5 of the ou'], 'the first 100 bytes, the last line cut');
    assert.ok(outcome.droppedBytes > 3000, String(outcome.droppedBytes));
    assert.equal(outcome.tail.at(-1), 'line 200 of the output');
    assert.ok(existsSync(path.join(dir, 'ran-to-the-end')));
  }));

test('a step past its time is killed with its children: no exit code, timed out', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const outcome = await runOne(step(dir, `echo started; sleep 30 & wait; touch ${dir}/not-killed`, { timeoutMs: 300 }), async () => undefined);
    assert.equal(outcome.timedOut, true);
    assert.equal(outcome.exitCode, null);
    assert.deepEqual(outcome.tail, ['started']);
    assert.ok(!existsSync(path.join(dir, 'not-killed')));
  }));

test('a shell form runs as `sh -c` would (no arguments, `exit` its status, nothing of the runner seen); an exec form runs as its own program', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const lines: string[] = [];
    const shell = await runOne(step(dir, 'echo "args:$#:$1"; set -e; false; echo not reached'), async (t) => void lines.push(t));
    assert.deepEqual(lines, ['args:0:']);
    assert.equal(shell.exitCode, 1);
    const exited = await runOne(step(dir, 'trap "echo trapped" EXIT; exit 3'), async (t) => void lines.push(t));
    assert.equal(exited.exitCode, 3);
    assert.equal(lines.at(-1), 'trapped');
    const exec = await runOne({ ...step(dir, ''), argv: ['/bin/echo', 'one word', '$HOME'] }, async (t) => void lines.push(t));
    assert.equal(exec.exitCode, 0);
    assert.equal(lines.at(-1), 'one word $HOME');
  }));

test('a stream cut before the step ends (its builder went) is told as such, with no exit code', async () => {
  let sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  let cut!: (end: ShellEnd) => void;
  const ended = new Promise<ShellEnd>((r) => (cut = r));
  const shell: GuestShell = { framed: true, ended, write: async () => undefined, resize: () => undefined, close: () => undefined, output: (fn) => (sink = fn) };
  const build = await BuildShell.open(async () => shell, {});
  const running = build.run(step('/', 'sleep 60'), async () => undefined);
  await new Promise((r) => setImmediate(r));
  sink!(processFrame('P', Buffer.from('42')), () => undefined);
  sink!(processFrame('O', Buffer.from('working\n')), () => undefined);
  cut({ kind: 'cut', error: 'vm_not_running', message: 'the VM stopped' });
  const outcome = await running;
  assert.equal(outcome.exitCode, null);
  assert.equal(outcome.timedOut, false);
  assert.equal(outcome.cut, 'the VM stopped');
  assert.deepEqual(outcome.tail, ['working']);
});

test('steps in one shell: each has its own WORKDIR, environment and empty stdin; what one sets, exports, changes or exits does not reach the next', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const shell = await BuildShell.open(localProcess, { PATH: process.env.PATH! });
    try {
      const lines: string[] = [];
      const say = async (t: string) => void lines.push(t);
      const a = path.join(dir, 'a');
      const first = await shell.run(step(a, 'export LEAK=1; mine=2; set -e; cd /; umask 077; trap "echo bye" EXIT; echo "$GREETING"; exit 5', { env: { PATH: process.env.PATH!, GREETING: "it's me" } }), say);
      assert.equal(first.exitCode, 5);
      assert.deepEqual(lines.splice(0), ["it's me", 'bye']);
      // The end line of another shell (no nonce of this one), a printed end-of-text byte, and no newline at the end.
      const second = await shell.run(step(path.join(dir, 'b'), 'echo "leak:${LEAK-none} mine:${mine-none} greeting:${GREETING-none} pwd:$(pwd) umask:$(umask) stdin:$(cat | wc -c)"; printf "\\036agentvm-step-end-0000:0\\n"; printf "no newline"', { env: { PATH: process.env.PATH!, OTHER: 'x' } }), say);
      assert.equal(second.exitCode, 0, JSON.stringify(second));
      assert.deepEqual(lines.splice(0), [`leak:none mine:none greeting:none pwd:${path.join(dir, 'b')} umask:0022`.replace('0022', process.umask().toString(8).padStart(4, '0')) + ' stdin:0', '\x1eagentvm-step-end-0000:0', 'no newline']);
      const exec = await shell.run({ ...step(dir, ''), argv: ['/bin/sh', '-c', 'echo "$0 $1"', 'zero', 'one'] }, say);
      assert.equal(exec.exitCode, 0);
      assert.deepEqual(lines.splice(0), ['zero one']);
      assert.ok(existsSync(a), 'the first step\'s WORKDIR was made');
      assert.ok(shell.running);
    } finally {
      shell.close();
    }
  }));

test('a step that ends its shell is cut, and the shell is no longer alive', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const shell = await BuildShell.open(localProcess, { PATH: process.env.PATH! });
    try {
      const r = await shell.run(step(dir, 'echo going; kill -9 $$; sleep 5'), async () => undefined);
      assert.equal(r.exitCode, null);
      assert.ok(r.cut);
      assert.equal(shell.running, false);
      const after = await shell.run(step(dir, 'echo never'), async () => undefined);
      assert.ok(after.cut);
    } finally {
      shell.close();
    }
  }));
