/**
 * Runs as records on real microVMs, with the ticker harness: live output over server-sent events,
 * resuming with Last-Event-ID, many watchers, a client that goes away, cancel, a VM restarted under a
 * run, an output flood, and a kill -9 of the server in the middle of a run.
 * Needs a built guest image: AGENTVM_TEST_IMAGE_DIR (npm run test:all sets it).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import type { ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { readRunStream, type RunOutput } from '../src/client/runEvents.ts';
import { apiClient, endServer, type ApiCall, killQemusUnder, rawRun, seedSnapshots, spawnServer, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const ADMIN = 'avm_admin_test_token_0123456789abcdefghijkl';


const lines = (n: number, tag = 'line') => Array.from({ length: n }, (_, i) => `${tag} ${i + 1}`);
const ASYNC = { Prefer: 'respond-async' };

/** A whole stream from `after`: its output events and the finished run. */
async function readAll(base: string, key: string, vmId: string, runId: string, after = 0, onOutput: (o: RunOutput) => void = () => undefined) {
  const out: RunOutput[] = [];
  const end = await readRunStream({ baseUrl: base, key, vmId, runId, after, onOutput: (o) => (out.push(o), onOutput(o)) }, () => undefined);
  return { out, end };
}

describe('runs as records on real microVMs', { skip }, () => {
  let dataDir: string;
  let server: RunningServer;
  let api: ApiCall;
  let key: string;
  let readKey: string;
  let other: ApiCall;
  let vmId: string;

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-runs-'));
    process.env.AGENTVM_ADMIN_TOKEN = ADMIN;
    await seedSnapshots(dataDir);
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
    await server.host.imageReady;
    const admin = apiClient(() => server.url, ADMIN);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'runs@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    key = tenant.body.api_key;
    api = apiClient(() => server.url, key);
    readKey = (await api('POST', '/v1/api/keys', { scope: 'read' })).body.key;
    other = apiClient(() => server.url, (await admin('POST', '/v1/admin/tenants', { email: 'runs-other@example.com' })).body.api_key);
    const created = await api('POST', '/v1/api/vms', { harness: 'ticker' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    vmId = created.body.vm_id;
    await running(vmId);
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  const running = (id: string) =>
    until(`${id} running`, async () => {
      const vm = (await api('GET', `/v1/api/vms/${id}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running' && server.host.driver!.isRunning(id) && vm;
    });
  const start = async (task: string) => {
    const r = await api('POST', `/v1/api/vms/${vmId}/run`, { task }, ASYNC);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body;
  };
  const finished = (runId: string, id = vmId) =>
    until(`${runId} finished`, async () => {
      const r = (await api('GET', `/v1/api/vms/${id}/runs/${runId}`)).body;
      return !['queued', 'running'].includes(r.status) && r;
    });

  test('a ticker run streams as it prints, resumes exactly after Last-Event-ID, and replays once finished', { timeout: 5 * 60_000 }, async () => {
    const queued = await start(lines(5).join('\n'));
    assert.match(queued.run_id, /^run_[A-Za-z0-9]+$/);
    assert.equal(queued.status, 'queued');
    assert.equal(queued.harness, 'ticker');
    assert.equal(queued.exit_code, null);
    assert.equal(queued.finished_at, null);

    // Two events, then the connection goes: the run is still running when they came (live, not at the end).
    const abort = new AbortController();
    const firstTwo: RunOutput[] = [];
    await readRunStream(
      { baseUrl: server.url, key, vmId, runId: queued.run_id, after: 0, signal: abort.signal, onOutput: (o) => (firstTwo.push(o), firstTwo.length === 2 && abort.abort()) },
      () => undefined,
    ).catch(() => undefined);
    assert.deepEqual(firstTwo.map((o) => [o.id, o.stream, o.text]), [[1, 'stdout', 'line 1\n'], [2, 'stdout', 'line 2\n']]);
    assert.equal((await api('GET', `/v1/api/vms/${vmId}/runs/${queued.run_id}`)).body.status, 'running');

    const rest = await readAll(server.url, key, vmId, queued.run_id, 2);
    assert.deepEqual(rest.out.map((o) => [o.id, o.text]), [[3, 'line 3\n'], [4, 'line 4\n'], [5, 'line 5\n']]);
    assert.equal(rest.end!.status, 'succeeded');
    assert.equal(rest.end!.exit_code, 0);
    assert.equal(rest.end!.stdout, `${lines(5).join('\n')}\n`);
    assert.ok(rest.end!.duration_ms! >= 4000, `one line a second: ${rest.end!.duration_ms} ms`);

    const replay = await readAll(server.url, key, vmId, queued.run_id);
    assert.deepEqual(replay.out.map((o) => o.id), [1, 2, 3, 4, 5]);
    assert.deepEqual(replay.end, rest.end);
    // Resuming after the last event of a finished run: just the end.
    assert.deepEqual((await readAll(server.url, key, vmId, queued.run_id, 5)).out, []);

    // A Last-Event-ID that is not a number, or ahead of the run: 400 naming it.
    for (const bad of ['x', '-1', '6', '1.5']) {
      const res = await fetch(`${server.url}/v1/api/vms/${vmId}/runs/${queued.run_id}/events`, { headers: { authorization: `Bearer ${key}`, 'last-event-id': bad } });
      assert.equal(res.status, 400, bad);
      const body = await res.json();
      assert.equal(body.error, 'invalid_request');
      assert.match(body.message, /^Last-Event-ID: /);
    }
    // The contract's answer to a run, waited on: the section-4 fields with its id and status.
    const sync = await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'one' });
    assert.equal(sync.status, 200);
    assert.deepEqual(Object.keys(sync.body).sort(), ['duration_ms', 'exit_code', 'finished_at', 'harness', 'model', 'provider', 'run_id', 'started_at', 'status', 'stderr', 'stdout', 'timed_out', 'vm_id']);
    assert.equal(sync.body.stdout, 'one\n');
    assert.equal(sync.body.status, 'succeeded');
    const list = await api('GET', `/v1/api/vms/${vmId}/runs?limit=1`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((r: any) => r.run_id), [sync.body.run_id], 'newest first');
    assert.equal(list.body.has_more, true);
    assert.equal(list.body.next_offset, 1);
    assert.ok(list.body.total >= 2);
  });

  test('20 watchers of one run all get every line, in order', { timeout: 5 * 60_000 }, async () => {
    const want = lines(6, 'tick');
    const run = await start(want.join('\n'));
    const watchers = await Promise.all(Array.from({ length: 20 }, () => readAll(server.url, key, vmId, run.run_id)));
    // A chunk is what the guest read at once (a slow guest may read two lines as one): every watcher gets the same ones.
    for (const w of watchers) {
      assert.equal(w.out.map((o) => o.text).join(''), want.map((l) => `${l}\n`).join(''));
      assert.deepEqual(w.out, watchers[0].out);
      assert.deepEqual(w.out.map((o) => o.id), w.out.map((_, i) => i + 1));
      assert.equal(w.end!.status, 'succeeded');
    }
  });

  test('a client that goes away mid-run: the run goes on and its whole result is there later', { timeout: 5 * 60_000 }, async () => {
    const abort = new AbortController();
    const task = lines(4, 'away').join('\n');
    const call = fetch(`${server.url}/v1/api/vms/${vmId}/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task }),
      signal: abort.signal,
    }).catch(() => null);
    const runId = await until('the run is running', async () => {
      const page = (await api('GET', `/v1/api/vms/${vmId}/runs?limit=1`)).body.data[0];
      return page?.task === task && page.status === 'running' && page.run_id;
    });
    abort.abort();
    assert.equal(await call, null);
    const done = await finished(runId);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.stdout, `${task}\n`);
  });

  test('cancel: a queued run never starts, a running one has its process group killed; bad ids and keys are refused', { timeout: 5 * 60_000 }, async () => {
    const long = await start(lines(60, 'long').join('\n'));
    const waiting = await start('never');
    await until('the long run prints', async () => (await api('GET', `/v1/api/vms/${vmId}/runs/${long.run_id}`)).body.stdout?.includes('long 1'));

    assert.equal((await apiClient(() => server.url, readKey)('POST', `/v1/api/vms/${vmId}/runs/${long.run_id}/cancel`)).status, 403);
    const theirs = await other('POST', `/v1/api/vms/${vmId}/runs/${long.run_id}/cancel`);
    const unknown = await api('POST', `/v1/api/vms/${vmId}/runs/run_doesnotexist/cancel`);
    assert.equal(theirs.status, 404);
    assert.equal(unknown.status, 404);
    assert.equal((await other('GET', `/v1/api/vms/${vmId}/runs/${long.run_id}`)).status, 404);
    assert.equal((await api('GET', `/v1/api/vms/${vmId}/runs/run_doesnotexist/events`)).status, 404);

    const q = await api('POST', `/v1/api/vms/${vmId}/runs/${waiting.run_id}/cancel`);
    assert.equal(q.status, 200);
    assert.equal(q.body.status, 'cancelled');
    assert.equal(q.body.started_at, null);

    const ticking = () => server.host.driver!.exec(vmId, { argv: ['sh', '-c', 'pgrep -c -x agentvm-ticker || true'] }, 10_000);
    assert.equal((await ticking()).stdout.trim(), '1');
    const t0 = Date.now();
    const c = await api('POST', `/v1/api/vms/${vmId}/runs/${long.run_id}/cancel`);
    assert.equal(c.status, 200, JSON.stringify(c.body));
    assert.equal(c.body.status, 'cancelled');
    assert.ok(c.body.stdout.startsWith('long 1\n'));
    assert.equal((await ticking()).stdout.trim(), '0', 'the whole process group is gone');
    process.stderr.write(`cancel answered in ${Date.now() - t0} ms\n`);
    // Cancelling a finished run answers it as it is.
    const again = await api('POST', `/v1/api/vms/${vmId}/runs/${long.run_id}/cancel`);
    assert.equal(again.body.status, 'cancelled');
    const stillQueued = await api('GET', `/v1/api/vms/${vmId}/runs/${waiting.run_id}`);
    assert.equal(stillQueued.body.status, 'cancelled', 'the queued run never ran');
    assert.equal(stillQueued.body.stdout, '');
  });

  test('a 100 MiB flood is kept to 4 MiB with the truncation note', { timeout: 5 * 60_000 }, async () => {
    // The API runs harness tasks only: the flood's command goes straight into the runs table.
    const done = await rawRun(server.services, server.host.executor!, vmId, ['sh', '-c', 'head -c 104857600 /dev/zero | tr "\\000" a; echo done >&2'], { timeoutMs: 300_000 });
    assert.equal(done.status, 'succeeded');
    const note = `\n[agentvm: output truncated: ${100 * 1024 * 1024 - 4 * 1024 * 1024} more bytes were not kept]\n`;
    assert.equal(done.stdout!.length, 4 * 1024 * 1024 + note.length);
    assert.ok(done.stdout!.endsWith(note));
    assert.equal(done.stderr, 'done\n');
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'still answers' })).body.stdout, 'still answers\n');
  });

  test('a restart of the VM under a run ends it lost, with what it printed', { timeout: 5 * 60_000 }, async () => {
    const run = await start(lines(60, 'doomed').join('\n'));
    await until('it prints', async () => (await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body.stdout?.includes('doomed 2'));
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/restart`)).status, 200);
    const lost = await finished(run.run_id);
    assert.equal(lost.status, 'lost');
    assert.ok(lost.stdout.startsWith('doomed 1\ndoomed 2\n'));
    assert.equal(lost.exit_code, null);
    await running(vmId);
    const r = await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'after restart' });
    assert.equal(r.body.stdout, 'after restart\n');
  });
});

describe('a run outlives a kill -9 of its server', { skip }, () => {
  let dataDir: string;
  let proc: ChildProcess | null = null;
  let url = '';

  async function startProcess(): Promise<void> {
    ({ proc, url } = await spawnServer(dataDir, { AGENTVM_ADMIN_TOKEN: ADMIN, AGENTVM_IMAGE_DIR: imageDir!, AGENTVM_IMAGE_BUILD: 'off', AGENTVM_LOG_LEVEL: 'info' }));
  }

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-runs-kill-'));
  });

  after(async () => {
    await endServer(proc);
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('kill -9 of the server in the middle of a 20-line ticker run: after the restart it ends succeeded with all 20 lines', { timeout: 10 * 60_000 }, async () => {
    await startProcess();
    const admin = apiClient(() => url, ADMIN);
    await until('ready', async () => (await fetch(`${url}/readyz`)).status === 200);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'kill@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const api = apiClient(() => url, tenant.body.api_key);
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'ticker' })).body.vm_id;
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running');
    const want = lines(20, 'kept');
    const run = (await api('POST', `/v1/api/vms/${vmId}/run`, { task: want.join('\n') }, ASYNC)).body;
    await until('three lines stored', async () => ((await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body.stdout ?? '').split('\n').length > 3);

    const gone = new Promise((r) => proc!.once('exit', r));
    proc!.kill('SIGKILL');
    await gone;
    // Lines printed while no server listens stay in the guest until the next one asks.
    await new Promise((r) => setTimeout(r, 4000));
    await startProcess();

    const done = await until('the run ends', async () => {
      const r = await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`).catch(() => null);
      return r?.status === 200 && !['queued', 'running'].includes(r.body.status) && r.body;
    });
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.equal(done.stdout, `${want.join('\n')}\n`);
    assert.equal(done.exit_code, 0);
    // Its events too: each line once, in order. A chunk is what the guest read at once: a slow guest
    // may read lines that came while it was busy as one chunk.
    const replay = await readAll(url, tenant.body.api_key, vmId, run.run_id);
    assert.equal(replay.out.map((o) => o.text).join(''), want.map((l) => `${l}\n`).join(''));
    assert.deepEqual(replay.out.map((o) => o.id), replay.out.map((_, i) => i + 1));
  });
});
