/**
 * Shells, files and previews through an API replica: the replica forwards each to the VM's host over
 * the internal endpoint (files as streamed bodies, a shell as a WebSocket between them, a preview or a
 * port forward as an upgraded connection the host joins to the guest's port). An API replica
 * and a VM host as separate processes on loopback ports, on one PostgreSQL database. Needs the
 * PostgreSQL server and the guest image of `npm run test:all` (AGENTVM_TEST_DATABASE_URL, AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { WebSocket } from 'ws';
import { randomBase62 } from '../src/domain/ids.ts';
import { forwardPort } from '../src/cli/previews.ts';
import { detached, freePort, killQemusUnder, seedSnapshots, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const pgUrl = process.env.AGENTVM_TEST_DATABASE_URL;
const skip = imageDir && pgUrl ? false : 'needs AGENTVM_TEST_IMAGE_DIR and AGENTVM_TEST_DATABASE_URL (npm run test:all sets both)';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const ADMIN = 'avm_admin_scaleshell_0123456789abcdefghijkl';
const INTERNAL = `avm_internal_${randomBase62(32)}`;

describe('shells and files through an API replica', { skip }, () => {
  let work: string;
  let dbUrl: string;
  const dbName = `agentvm_scaleshell_${randomBase62(10).toLowerCase()}`;
  const procs = new Map<string, { proc: ChildProcess; port: number }>();

  async function start(name: string, args: string[], ready = '/readyz'): Promise<void> {
    const port = await freePort();
    const seeded = args[0] === 'host' && (await seedSnapshots(path.join(work, name)));
    const proc = spawn(process.execPath, [path.join(root, 'bin/agentvm.js'), ...args, '--port', String(port), '--data-dir', path.join(work, name)], {
      env: {
        ...process.env,
        DATABASE_URL: dbUrl,
        AGENTVM_INTERNAL_TOKEN: INTERNAL,
        AGENTVM_ADMIN_TOKEN: ADMIN,
        AGENTVM_IMAGE_DIR: imageDir!,
        AGENTVM_IMAGE_BUILD: 'off',
        // The VM resumes from the run's golden snapshot (scripts/test-all.sh makes it once; seedSnapshots),
        // with no standbys; without one, the host would make its own, so it boots cold.
        AGENTVM_SNAPSHOTS: seeded ? 'on' : 'off',
        AGENTVM_STANDBY_VMS: '0',
        AGENTVM_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    procs.set(name, { proc, port });
    await until(`${name} ready`, async () => (await fetch(`http://127.0.0.1:${port}${ready}`)).status === 200, 90_000);
  }

  before(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'agentvm-scaleshell-'));
    const admin = new pg.Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const u = new URL(pgUrl!);
    u.pathname = `/${dbName}`;
    dbUrl = u.toString();
  });

  after(async () => {
    for (const { proc } of procs.values()) if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await killQemusUnder(work);
    const admin = new pg.Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    await rm(work, { recursive: true, force: true });
  });

  test('a shell, an upload, a download, a preview and a port forward through the replica; refusals come back as the host words them', { timeout: 10 * 60_000 }, async () => {
    await start('api', ['serve', '--role', 'api'], '/healthz');
    await start('host', ['host']);
    const base = `http://127.0.0.1:${procs.get('api')!.port}`;
    const call = async (key: string, method: string, p: string, body?: unknown) => {
      const res = await fetch(`${base}${p}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    const tenant = (await call(ADMIN, 'POST', '/v1/admin/tenants', { email: 'scaleshell@example.com' })).body;
    await call(ADMIN, 'PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const key = tenant.api_key as string;
    const vmId = (await call(key, 'POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'none', allow: [] } })).body.vm_id as string;
    await until(`${vmId} running`, async () => {
      const vm = (await call(key, 'GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(vm.status_reason);
      return vm.status === 'running';
    });

    // Files, streamed through the replica both ways.
    const data = randomBytes(8 * 1024 * 1024);
    const put = await fetch(`${base}/v1/api/vms/${vmId}/files?path=through/replica.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      body: data,
    });
    assert.equal(put.status, 201, await put.clone().text());
    assert.deepEqual(await put.json(), { path: '/persist/workspace/through/replica.bin', size: data.length });
    const get = await fetch(`${base}/v1/api/vms/${vmId}/files?path=through/replica.bin`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(get.status, 200);
    assert.equal(createHash('sha256').update(Buffer.from(await get.arrayBuffer())).digest('hex'), createHash('sha256').update(data).digest('hex'));
    const list = await call(key, 'GET', `/v1/api/vms/${vmId}/files?path=through`);
    assert.deepEqual(list.body.data.map((e: { name: string }) => e.name), ['replica.bin']);
    const missing = await call(key, 'GET', `/v1/api/vms/${vmId}/files?path=through/nothing`);
    assert.equal(missing.status, 404);
    assert.match(missing.body.message, /^path: /);
    const badLink = await fetch(`${base}/v1/api/vms/${vmId}/files?path=/persist/../etc/passwd`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(badLink.status, 400);

    // A shell through the replica: its output, its size, its exit status in the close.
    const ticket = (await call(key, 'POST', `/v1/api/vms/${vmId}/shell`)).body;
    assert.match(ticket.url, new RegExp(`^ws://127\\.0\\.0\\.1:${procs.get('api')!.port}/`));
    const ws = new WebSocket(`${ticket.url}&cols=91&rows=27`);
    let out = '';
    ws.on('message', (d) => (out += d.toString()));
    const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    ws.send(Buffer.from('echo $((6*7)) $(id -un) $(stty size); exit 5\n'));
    assert.deepEqual(await closed, { code: 1000, reason: 'exit 5' });
    assert.match(out, /42 agent 27 91/);

    // A preview and a port forward through the replica: it reaches the port through the VM's host.
    const app = "require('node:http').createServer((q, s) => s.end('replica saw ' + q.url)).listen(8080)";
    const putApp = await fetch(`${base}/v1/api/vms/${vmId}/files?path=app.js`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: app });
    assert.equal(putApp.status, 201);
    const starter = new WebSocket((await call(key, 'POST', `/v1/api/vms/${vmId}/shell`)).body.url);
    const started = new Promise<{ code: number; reason: string }>((resolve) => starter.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    await new Promise((r, j) => (starter.once('open', r), starter.once('error', j)));
    starter.send(Buffer.from(`${detached('node /persist/workspace/app.js >/tmp/app.log 2>&1')}; exit 0\n`));
    assert.deepEqual(await started, { code: 1000, reason: 'exit 0' });
    await until('the app listening, as the replica lists it', async () => (await call(key, 'GET', `/v1/api/vms/${vmId}/ports`)).body?.data?.some((p: { port: number }) => p.port === 8080), 240_000);
    const preview = await fetch(`${base}/through-replica?a=1`, { headers: { authorization: `Bearer ${key}`, 'x-agentvm-vm': vmId, 'x-agentvm-port': '8080' } });
    assert.equal(preview.status, 200);
    assert.equal(await preview.text(), 'replica saw /through-replica?a=1');
    const closedPort = await fetch(`${base}/`, { headers: { authorization: `Bearer ${key}`, 'x-agentvm-vm': vmId, 'x-agentvm-port': '9999' } });
    assert.equal(closedPort.status, 502);
    assert.equal((await closedPort.json()).error, 'port_closed');
    const fwd = await forwardPort({ baseUrl: base, key, vmId, port: 8080, local: 0, bind: '127.0.0.1' });
    try {
      assert.equal(await (await fetch(`http://127.0.0.1:${fwd.port}/forwarded`)).text(), 'replica saw /forwarded');
    } finally {
      await fwd.close();
    }

    // The VM stopped under an open shell: the replica closes the customer's socket with the host's reason.
    const again = new WebSocket((await call(key, 'POST', `/v1/api/vms/${vmId}/shell`)).body.url);
    let seen = '';
    again.on('message', (d) => (seen += d.toString()));
    const cut = new Promise<{ code: number; reason: string }>((resolve) => again.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    await new Promise((r, j) => (again.once('open', r), again.once('error', j)));
    again.send(Buffer.from('echo up-$((1+1))\n'));
    await until('the second shell answers', async () => seen.includes('up-2'), 120_000);
    assert.equal((await call(key, 'POST', `/v1/api/vms/${vmId}/stop`)).status, 200);
    const c = await cut;
    assert.equal(c.code, 4409);
    assert.match(c.reason, /^vm_not_running: /);
    await until('stopped', async () => (await call(key, 'GET', `/v1/api/vms/${vmId}`)).body.status === 'stopped');
    assert.equal((await call(key, 'POST', `/v1/api/vms/${vmId}/shell`)).status, 409);
    await call(key, 'DELETE', `/v1/api/vms/${vmId}`);
  });
});
