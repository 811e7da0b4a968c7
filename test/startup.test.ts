/**
 * The command as `npm ci` builds it: the bundle in dist/ (scripts/build.mjs) runs when it is current and
 * the sources when one is newer; from the bundle `serve` finds what it reads beside its sources (the
 * migrations, the console's assets, Swagger UI's files). In a copy of the tree, so that the build and the
 * sources changed here touch nothing else.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import path from 'node:path';

const run = promisify(execFile);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
let tree: string;
const bin = () => path.join(tree, 'bin/agentvm.js');
const version = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')).version as string;

before(async () => {
  tree = await mkdtemp(path.join(tmpdir(), 'agentvm-tree-'));
  for (const f of ['src', 'bin', 'scripts', 'package.json', 'tsconfig.json']) await cp(path.join(root, f), path.join(tree, f), { recursive: true });
  await symlink(path.join(root, 'node_modules'), path.join(tree, 'node_modules'));
  await run(process.execPath, [path.join(tree, 'scripts/build.mjs')], { cwd: tree });
});
after(async () => {
  if (tree) await rm(tree, { recursive: true, force: true });
});

/** `agentvm …` in the copy: its exit code and output. */
function agentvm(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(process.execPath, [bin(), ...args], { cwd: tree, env: { ...process.env, AGENTVM_FROM_SOURCE: '', ...env } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

test('agentvm --version prints the version', async () => {
  const r = await agentvm(['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `${version}\n`);
});

test('the bundle runs while it is current; a source newer than it, or AGENTVM_FROM_SOURCE=1, runs the sources', async () => {
  const main = path.join(tree, 'src/cli/main.ts');
  const text = await readFile(main, 'utf8');
  const { built_at: builtAt } = JSON.parse(await readFile(path.join(tree, 'dist/build.json'), 'utf8')) as { built_at: number };
  try {
    // Sources that cannot run, dated before the build: the bundle answers.
    await writeFile(main, `${text}\nthis is not TypeScript (\n`);
    const before = new Date(builtAt - 60_000);
    await utimes(main, before, before);
    const bundled = await agentvm(['--version']);
    assert.equal(bundled.code, 0, bundled.stderr);
    assert.equal(bundled.stdout, `${version}\n`);
    // Asked for the sources: they run, and fail.
    assert.notEqual((await agentvm(['--version'], { AGENTVM_FROM_SOURCE: '1' })).code, 0);
    // Edited after the build: the sources run, and fail.
    const now = new Date(builtAt + 60_000);
    await utimes(main, now, now);
    assert.notEqual((await agentvm(['--version'])).code, 0);
  } finally {
    await writeFile(main, text);
    const before = new Date(builtAt - 60_000);
    await utimes(main, before, before);
  }
});

test('serve from the bundle: a new database with its migrations, the console and its assets, the API documents and /docs', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-bundle-serve-'));
  // No QEMU on the PATH: the server is the API alone.
  const proc = spawn(process.execPath, [bin(), 'serve', '--port', '0', '--data-dir', dataDir], {
    cwd: tree,
    env: { ...process.env, AGENTVM_FROM_SOURCE: '', AGENTVM_IMAGE_BUILD: 'off', PATH: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stderr!.on('data', (d) => (out += d));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line in 60 s:\n${out}`)), 60_000);
      proc.stdout!.on('data', (d) => {
        out += d;
        const m = /"url":"(http[^"]+)".*"agentvm is listening"/.exec(out);
        if (m) resolve((clearTimeout(timer), m[1]));
      });
      proc.once('exit', (code) => reject(new Error(`serve exited ${code}:\n${out}`)));
    });
    // A request as soon as it listens waits for the app: the database made, every migration applied.
    const admin = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    const created = await fetch(`${url}/v1/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bundle@example.com' }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const key = ((await created.json()) as { api_key: string }).api_key;
    const whoami = await fetch(`${url}/v1/api/whoami`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(((await whoami.json()) as { email: string }).email, 'bundle@example.com');

    const doc = (await (await fetch(`${url}/v1/api/openapi.json`)).json()) as { openapi: string; paths: object };
    assert.match(doc.openapi, /^3\.1/);
    assert.ok(Object.keys(doc.paths).length > 20);
    assert.equal((await fetch(`${url}/v1/admin/openapi.json`)).status, 200);
    assert.equal((await fetch(`${url}/docs/assets/swagger-ui.css`)).status, 200);

    const login = await (await fetch(`${url}/console/login`)).text();
    const assets = [...login.matchAll(/\/console\/assets\/[\w.-]+\?v=[0-9a-f]+/g)].map((m) => m[0]);
    assert.ok(assets.length >= 2, login);
    for (const a of assets) assert.equal((await fetch(`${url}${a}`)).status, 200, a);
  } finally {
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    assert.equal(await gone, 0, out);
    await rm(dataDir, { recursive: true, force: true });
  }
});
