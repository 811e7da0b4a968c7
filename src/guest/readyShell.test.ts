/**
 * The login shell kept ready for E2B's commands (readyShell.ts), with this machine's bash and a home
 * of the test's own (its .bash_profile stands in for a VM's login profile): a command taken by a ready
 * shell prints, exits and sees what `bash -l -c` would give it; a profile's words come first; what is
 * not the same login is refused. The same through E2B's SDK on a real VM: test/e2b.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { keepReady, loginCommand, takeReady, type Login } from './readyShell.ts';

let home = '';
let work = '';
let login: Login;

before(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'agentvm-ready-'));
  work = path.join(home, 'work');
  await mkdir(work);
  // A profile that speaks and sets a variable, as a login's does.
  await writeFile(path.join(home, '.bash_profile'), 'echo profile-said >&2\nexport FROM_PROFILE=yes\n');
  login = { uid: process.getuid!(), gid: process.getgid!(), env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, USER: 'u', LOGNAME: 'u', SHELL: '/bin/bash', LANG: 'C.UTF-8', AGENT_SAID: 'before' } };
});
after(() => rm(home, { recursive: true, force: true }));

/** Runs `command` in the ready shell; its output and exit code. */
async function run(child: ChildProcess, early: Array<['O' | 'E', Buffer]>, input?: string): Promise<{ out: string; err: string; code: number | null }> {
  let out = early.filter(([t]) => t === 'O').map(([, b]) => b.toString()).join('');
  let err = early.filter(([t]) => t === 'E').map(([, b]) => b.toString()).join('');
  child.stdout!.on('data', (b: Buffer) => (out += b));
  child.stderr!.on('data', (b: Buffer) => (err += b));
  if (input !== undefined) child.stdin!.end(input);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  return { out, err, code };
}

/** A ready shell (its profile may still be running: a command taken then waits for it). */
const readyShell = (l: Login = login) => keepReady(l, home)!;

test('only `/bin/bash -l -c CMD` is a login command', () => {
  assert.equal(loginCommand(['/bin/bash', '-l', '-c', 'echo hi']), 'echo hi');
  assert.equal(loginCommand(['/bin/bash', '-c', 'echo hi']), null);
  assert.equal(loginCommand(['/bin/bash', '-l', '-c', 'echo', 'name']), null);
  assert.equal(loginCommand(['bash', '-l', '-c', 'echo hi']), null);
});

test('a ready shell runs its command as `bash -l -c` would: output, exit code, $0, the directory, the variables, the priority', async () => {
  readyShell();
  const env = { ...login.env, AGENT_SAID: 'after', SECRET_TOKEN: 'x y' };
  const taken = takeReady({ ...login, env }, {}, 'echo "$0|$PWD|$(pwd)|${OLDPWD-unset}|$FROM_PROFILE|$AGENT_SAID|$SECRET_TOKEN|$SECONDS|$HOSTNAME|$(nice)"; exit 7', work, false);
  assert.ok(taken, 'the ready shell is taken');
  const { out, err, code } = await run(taken.child, taken.early);
  assert.equal(code, 7);
  assert.equal(err, 'profile-said\n', "the profile's words come first, once");
  assert.equal(out, `/bin/bash|${work}|${work}|unset|yes|after|x y|0|${os.hostname()}|${os.getPriority()}\n`, "and at the agent's priority, not the ready shell's lowest");
  assert.equal(takeReady(login, {}, 'true', work, false), null, 'taken once');
});

test("a command's stdin, several lines and quotes reach it as they are", async () => {
  readyShell();
  const command = "read -r line\nprintf '%s|%s\\n' \"$line\" 'it'\"'\"'s'";
  const taken = takeReady(login, {}, command, home, true)!;
  const { out, code } = await run(taken.child, taken.early, 'a \\line\n');
  assert.equal(code, 0);
  assert.equal(out, "a \\line|it's\n");
});

test('a long command with text not in ASCII, as a heredoc that writes a file is, arrives whole', async () => {
  readyShell();
  const body = Array.from({ length: 4000 }, (_, i) => `line ${i}: héllo wörld ✓ \\ $HOME '"`).join('\n');
  const file = path.join(work, 'written.txt');
  const taken = takeReady(login, {}, `cat > ${file} <<'EOF'\n${body}\nEOF\nwc -c < ${file}`, home, false)!;
  const { out, code } = await run(taken.child, taken.early);
  assert.equal(code, 0);
  assert.equal(Number(out.trim()), Buffer.byteLength(`${body}\n`));
  assert.equal(await readFile(file, 'utf8'), `${body}\n`);
});

test("a command's own variables are set; its own PATH, a name no shell can set, or another login, starts its own shell", async () => {
  readyShell();
  const own = takeReady(login, { MINE: 'a b', AGENT_SAID: 'own' }, 'echo "$MINE|$AGENT_SAID"', home, false)!;
  assert.equal((await run(own.child, own.early)).out, 'a b|own\n');
  readyShell();
  const next = takeReady(login, {}, 'echo "${MINE-unset}|$AGENT_SAID"', home, false)!;
  assert.equal((await run(next.child, next.early)).out, 'unset|before\n', "the last command's variables are not the next's");
  readyShell();
  assert.equal(takeReady(login, { PATH: '/bin' }, 'true', home, false), null);
  readyShell();
  assert.equal(takeReady(login, { 'not.a.name': '1' }, 'true', home, false), null, 'a variable no shell can set');
  readyShell();
  assert.equal(takeReady({ ...login, env: { ...login.env, PATH: '/bin' } }, {}, 'true', home, false), null);
  readyShell();
  assert.equal(takeReady({ ...login, uid: login.uid + 1 }, {}, 'true', home, false), null, 'another user has no ready shell');
  const taken = takeReady(login, {}, 'exit 0', home, false);
  assert.ok(taken, 'the same login still finds its shell');
  assert.equal((await run(taken.child, taken.early)).code, 0);
});

test('a ready shell that ended is not taken, and one is kept per login', async () => {
  const child = readyShell();
  assert.equal(keepReady(login, home), child, 'one kept');
  const gone = new Promise((r) => child.once('exit', r));
  process.kill(child.pid!, 'SIGKILL');
  await gone;
  assert.equal(takeReady(login, {}, 'true', home, false), null);
  const next = readyShell();
  assert.notEqual(next, child);
  const taken = takeReady(login, {}, 'exit 3', home, false)!;
  assert.equal(taken.child, next);
  assert.equal((await run(taken.child, taken.early)).code, 3);
});
