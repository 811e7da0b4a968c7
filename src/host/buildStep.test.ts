/**
 * A build's steps besides RUN (buildStep.ts) with this machine's shells standing in for the builder's:
 * a WORKDIR's owners, a COPY's files, the fallback when an image has no BusyBox. The same on a real
 * builder VM: test/images.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExecResult } from '../wire/protocol.ts';
import { BUSYBOX_SH, copyStep, withoutBusybox, workdirArgv } from './buildStep.ts';

/** Runs `fn` in a new folder of this machine's temporary folder, removed after. */
async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-step-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

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

test("a COPY of one file to `.` or to a folder already there puts it inside, as Docker (else the file is the destination)", () =>
  inTempDir(async (dir) => {
    const exec = async (args: { argv: string[]; stdin?: string }) => {
      const r = spawnSync(args.argv[0], args.argv.slice(1), { input: args.stdin ?? '', encoding: 'utf8' });
      return { exit_code: r.status, stdout: r.stdout, stderr: r.stderr } as ExecResult;
    };
    const context = { 'requirements.txt': Buffer.from('flask\n').toString('base64') };
    const copy = (dest: string, workdir: string) =>
      copyStep(exec as never, { kind: 'copy', line: 2, text: `COPY requirements.txt ${dest}`, sources: ['requirements.txt'], dest, chown: null, chmod: null } as never, workdir, context, path.join(dir, 'mark'));
    const team = path.join(dir, 'opt', 'team');
    await mkdir(team, { recursive: true });
    await copy('.', team);
    assert.equal(await readFile(path.join(team, 'requirements.txt'), 'utf8'), 'flask\n', "the README's own `WORKDIR /opt/team` then `COPY requirements.txt .`");
    await mkdir(path.join(dir, 'srv'));
    await copy(path.join(dir, 'srv'), '/');
    assert.equal(await readFile(path.join(dir, 'srv', 'requirements.txt'), 'utf8'), 'flask\n', 'into a folder already there');
    await copy(path.join(dir, 'reqs.txt'), '/');
    assert.equal(await readFile(path.join(dir, 'reqs.txt'), 'utf8'), 'flask\n', 'a new path is the file itself');
  }));
