// The echo harness's program (files/agentvm-echo), run by the host's static BusyBox awk (the image
// builder's busybox-static, the guest's own package) through a link named awk as the guest runs it,
// with its root-filesystem counter directory pointed at a temporary one. The real VM tests run it in the guest.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildInvocation } from '../harness/invoke.ts';
import { GUEST_AWK } from '../wire/protocol.ts';

const source = new URL('./files/agentvm-echo', import.meta.url);
const ROOTFS_DIR = '"/var/lib/agentvm-echo"';

const BUSYBOX = '/bin/busybox';

describe('the echo harness program', { skip: existsSync(BUSYBOX) ? false : 'no busybox here' }, () => {
  let dir: string;
  let program: string;
  let home: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-echo-'));
    home = path.join(dir, 'home');
    await mkdir(home);
    await mkdir(path.join(dir, 'rootfs'));
    const text = await readFile(source, 'utf8');
    assert.ok(text.includes(ROOTFS_DIR), 'the program names its root-filesystem counter directory');
    assert.ok(text.startsWith(`#!${GUEST_AWK} -f\n`), 'the program runs with the guest\'s awk');
    const awk = path.join(dir, 'awk');
    await symlink(BUSYBOX, awk);
    program = path.join(dir, 'agentvm-echo');
    await writeFile(program, text.replace(GUEST_AWK, awk).replace(ROOTFS_DIR, JSON.stringify(path.join(dir, 'rootfs'))));
    await chmod(program, 0o755);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** Runs it as the echo harness's invocation does (argv[0] replaced by the copy). */
  const echo = async (task: string) => {
    const { argv } = buildInvocation('echo', { task });
    const { stdout } = await promisify(execFile)(program, argv.slice(1), { env: { HOME: home, PATH: '/usr/bin:/bin' } });
    assert.ok(stdout.endsWith('}\n') && stdout.indexOf('\n') === stdout.length - 1, `one line: ${JSON.stringify(stdout)}`);
    return JSON.parse(stdout) as { task: string; hostname: string; kernel: string; persist_runs: number; rootfs_runs: number };
  };

  test('answers the task as JSON, whatever bytes it holds, and counts its runs', async () => {
    const first = await echo('hello');
    assert.deepEqual(first, { task: 'hello', hostname: os.hostname(), kernel: os.release(), persist_runs: 1, rootfs_runs: 1 });
    const tricky = 'a "quoted" \\ back\nslash\ttab\r\u0001\u001f\u007f é 漢字 x=1';
    assert.equal((await echo(tricky)).task, tricky);
    // A task that looks like an option, or is empty, is still the task.
    const dashed = await echo('-W version');
    assert.equal(dashed.task, '-W version');
    assert.equal((await echo('')).task, '');
    assert.equal(dashed.persist_runs, 3);
    assert.equal(dashed.rootfs_runs, 3);
  });

  test('goes on from a count the earlier program left', async () => {
    const fresh = path.join(dir, 'home2');
    await mkdir(fresh);
    await writeFile(path.join(fresh, '.agentvm-echo-runs'), '41\n');
    const { argv } = buildInvocation('echo', { task: 'x' });
    const { stdout } = await promisify(execFile)(program, argv.slice(1), { env: { HOME: fresh } });
    assert.equal(JSON.parse(stdout).persist_runs, 42);
    const { stdout: again } = await promisify(execFile)(program, argv.slice(1), { env: { HOME: fresh } });
    assert.equal(JSON.parse(again).persist_runs, 43);
  });
});
