/**
 * A build step's output streamed line by line (buildStep.ts), with a process of this machine standing
 * in for the builder's agent (the same frames as guest/process.ts sends: `P`, `O`, `E`, `X`; `K` kills
 * the group) and this machine's /bin/sh running the step's own shell: lines reach the log while the
 * step still runs, the cap counts what it cuts, the exit code is the step's, a timeout kills it.
 * The same path on a real builder VM: test/images.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { GuestShell, ShellEnd } from '../domain/guestAccess.ts';
import type { ExecResult, ProcessOpen } from '../wire/protocol.ts';
import { processFrame } from '../wire/processFrames.ts';
import { BUSYBOX_SH, copyStep, runStreamed, splitLines, withoutBusybox, workdirArgv, type BuilderProcess, type StreamedStep } from './buildStep.ts';

/** The builder's agent starting a program on a stream, on this machine. */
const localProcess: BuilderProcess = async (p: ProcessOpen) => {
  const child = spawn(p.argv[0], p.argv.slice(1), { cwd: p.cwd ?? '/', env: p.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  const early: Buffer[] = [];
  const send = (b: Buffer) => (sink ? sink(b, () => undefined) : early.push(b));
  send(processFrame('P', Buffer.from(String(child.pid))));
  child.stdout.on('data', (c: Buffer) => send(processFrame('O', c)));
  child.stderr.on('data', (c: Buffer) => send(processFrame('E', c)));
  const ended = new Promise<ShellEnd>((resolve) =>
    child.on('close', (code, signal) => {
      send(processFrame('X', Buffer.from(String(signal ? os.constants.signals[signal] : (code ?? 0) << 8))));
      resolve({ kind: 'exit', exit_code: code, signal });
    }),
  );
  const shell: GuestShell = {
    framed: true,
    ended,
    write: async (bytes) => {
      // The step's runner writes only `K` frames: no bytes, the signal's number where a length would be.
      if (bytes[0] === 'K'.charCodeAt(0)) process.kill(-child.pid!, Number.parseInt(bytes.subarray(1, 9).toString(), 16));
    },
    resize: () => undefined,
    output: (fn) => {
      sink = fn;
      for (const b of early.splice(0)) fn(b, () => undefined);
    },
    close: () => undefined,
  };
  return shell;
};

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
    const outcome = await runStreamed(localProcess, step(workdir, script, { sync: true, mark }), async (text) => {
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
    const outcome = await runStreamed(localProcess, step(dir, `for i in $(seq 1 200); do echo "line $i of the output"; done; touch ${dir}/ran-to-the-end`, { capBytes: 100 }), async (t) => void lines.push(t));
    assert.equal(outcome.exitCode, 0, JSON.stringify(outcome));
    assert.deepEqual(lines, ['line 1 of the output', 'line 2 of the output', 'line 3 of the output', 'line 4 of the output', 'line 5 of the ou'], 'the first 100 bytes, the last line cut');
    assert.ok(outcome.droppedBytes > 3000, String(outcome.droppedBytes));
    assert.equal(outcome.tail.at(-1), 'line 200 of the output');
    assert.ok(existsSync(path.join(dir, 'ran-to-the-end')));
  }));

test('a step past its time is killed with its children: no exit code, timed out', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const outcome = await runStreamed(localProcess, step(dir, `echo started; sleep 30 & wait; touch ${dir}/not-killed`, { timeoutMs: 300 }), async () => undefined);
    assert.equal(outcome.timedOut, true);
    assert.equal(outcome.exitCode, null);
    assert.deepEqual(outcome.tail, ['started']);
    assert.ok(!existsSync(path.join(dir, 'not-killed')));
  }));

test('a shell form runs as `sh -c` would (no arguments, `exit` its status, nothing of the runner seen); an exec form runs as its own program', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    const lines: string[] = [];
    const shell = await runStreamed(localProcess, step(dir, 'echo "args:$#:$1"; set -e; false; echo not reached'), async (t) => void lines.push(t));
    assert.deepEqual(lines, ['args:0:']);
    assert.equal(shell.exitCode, 1);
    const exited = await runStreamed(localProcess, step(dir, 'trap "echo trapped" EXIT; exit 3'), async (t) => void lines.push(t));
    assert.equal(exited.exitCode, 3);
    assert.equal(lines.at(-1), 'trapped');
    const exec = await runStreamed(localProcess, { ...step(dir, ''), argv: ['/bin/echo', 'one word', '$HOME'] }, async (t) => void lines.push(t));
    assert.equal(exec.exitCode, 0);
    assert.equal(lines.at(-1), 'one word $HOME');
  }));

test('a stream cut before the step ends (its builder went) is told as such, with no exit code', async () => {
  let sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  let cut!: (end: ShellEnd) => void;
  const ended = new Promise<ShellEnd>((r) => (cut = r));
  const shell: GuestShell = { framed: true, ended, write: async () => undefined, resize: () => undefined, close: () => undefined, output: (fn) => (sink = fn) };
  const running = runStreamed(async () => shell, step('/', 'sleep 60'), async () => undefined);
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

test("a WORKDIR's folders it makes are the USER's; those already there keep their owner", { skip: process.getuid!() !== 0 && 'needs root (chown)' }, () =>
  inTempDir(async (dir) => {
    await mkdir(path.join(dir, 'home'));
    const argv = workdirArgv(path.join(dir, 'home', 'app', 'src'), '65534:65534');
    assert.equal(spawnSync(argv[0], argv.slice(1)).status, 0);
    for (const [sub, uid] of [['home', 0], ['home/app', 65534], ['home/app/src', 65534]] as const) assert.equal((await stat(path.join(dir, sub))).uid, uid, sub);
    const again = workdirArgv(path.join(dir, 'home', 'app'), '');
    assert.equal(spawnSync(again[0], again.slice(1)).status, 0);
    assert.equal((await stat(path.join(dir, 'home', 'app'))).uid, 65534, 'a folder there already keeps its owner');
    const asRoot = workdirArgv(path.join(dir, 'opt', 'tool'), '');
    assert.equal(spawnSync(asRoot[0], asRoot.slice(1)).status, 0);
    assert.equal((await stat(path.join(dir, 'opt', 'tool'))).uid, 0);
  }));

test("the builder's own scripts fall back to /bin/sh only when BusyBox could not start", () => {
  const argv = [...BUSYBOX_SH, 'mkdir -p "$1"', 'x', '/a'];
  const missing = { exit_code: 127, stderr: 'spawn /bin/busybox ENOENT\n' } as ExecResult;
  assert.deepEqual(withoutBusybox(argv, missing), ['/bin/sh', '-c', 'mkdir -p "$1"', 'x', '/a']);
  assert.deepEqual(withoutBusybox(['/bin/busybox', 'sync'], missing), ['sync']);
  // The script's own 127 (a command it ran was not found) is its answer, not a reason to run it again.
  assert.equal(withoutBusybox(argv, { exit_code: 127, stderr: 'sh: nope: not found\n' } as ExecResult), null);
  assert.equal(withoutBusybox(['/bin/sh', '-c', ':'], missing), null);
});

test('a COPY writes small files several to an exec and a big one in chunks, each where Docker puts it, the mark first', { timeout: 60_000 }, () =>
  inTempDir(async (dir) => {
    // The builder's exec, as the guest agent runs it: the program with the arguments, stdin given whole.
    const calls: string[][] = [];
    const exec = async (args: { argv: string[]; stdin?: string }) => {
      calls.push(args.argv);
      const r = spawnSync(args.argv[0], args.argv.slice(1), { input: args.stdin ?? '', encoding: 'utf8' });
      return { exit_code: r.status, stdout: r.stdout, stderr: r.stderr } as ExecResult;
    };
    const big = Buffer.alloc(700 * 1024, 7);
    const context = {
      'app/a.txt': Buffer.from('alpha\n').toString('base64'),
      'app/lib/b.txt': Buffer.from('beta\n').toString('base64'),
      'app/empty': '',
      'app/data.bin': big.toString('base64'),
      'other.txt': Buffer.from('not copied').toString('base64'),
    };
    const mark = path.join(dir, 'mark');
    const step = { kind: 'copy' as const, line: 3, text: 'COPY app/ ./srv/', sources: ['app/'], dest: './srv/', chown: null, chmod: '640' };
    const copied = await copyStep(exec as never, step as never, path.join(dir, 'work'), context, mark);
    assert.equal(copied, 4);
    const srv = path.join(dir, 'work', 'srv');
    assert.equal(await readFile(path.join(srv, 'a.txt'), 'utf8'), 'alpha\n');
    assert.equal(await readFile(path.join(srv, 'lib', 'b.txt'), 'utf8'), 'beta\n');
    assert.equal((await readFile(path.join(srv, 'empty'))).length, 0);
    assert.ok((await readFile(path.join(srv, 'data.bin'))).equals(big), 'the big file whole, from its chunks');
    assert.equal((await stat(path.join(srv, 'lib', 'b.txt'))).mode & 0o777, 0o640, '--chmod');
    assert.ok(existsSync(mark));
    // The big one in two chunks, the three small files in one exec, then the --chmod.
    assert.equal(calls.length, 4, calls.map((c) => c.slice(3, 6).join(' ')).join('\n'));
  }));
