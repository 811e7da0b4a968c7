/**
 * Suspend with memory on real microVMs (decisions section 12): a tier VM suspended in the middle of a
 * ticker run draws nothing while suspended, its QEMU gone; started again it goes on where it was (the
 * run ends with every line once and in order, a file in a tmpfs and a sleeping process are still there, its
 * clock is now). Stop and restart discard the saved memory; a damaged state file makes the start boot
 * fresh from the disks (the persist disk intact, status_reason says so); QEMU killed in the middle of
 * a suspend never leaves a state a start would trust; bad requests are refused and change nothing.
 * Needs a built guest image: AGENTVM_TEST_IMAGE_DIR (npm run test:all sets it).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, open, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { RunningServer } from '../src/server.ts';
import { apiClient, detached, endServer, killQemusUnder, qemuPidsUnder, spawnServer, until, type ApiCall } from './helpers.ts';
import { startVmTestServer, type VmTestServer } from './vmServer.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const ADMIN = 'avm_admin_test_token_suspend_0123456789abc';


describe('suspend with memory on real microVMs', { skip }, () => {
  let t: VmTestServer;
  let dataDir: string;
  let server: RunningServer;
  let admin: ApiCall;
  let api: ApiCall;

  const vmDir = (vmId: string) => path.join(dataDir, 'vms', vmId);
  const sh = (vmId: string, script: string, timeoutMs?: number) => t.sh(vmId, script, timeoutMs);
  const vm = async (vmId: string) => (await api('GET', `/v1/api/vms/${vmId}`)).body;
  const untilStatus = (vmId: string, status: string, ms?: number) => t.untilStatus(vmId, status, ms);
  const drawnFor = async (vmId: string) =>
    (await server.services.db.query<{ cents: number }>(`SELECT coalesce(sum(amount_cents), 0)::int AS cents FROM ledger WHERE vm_id = $1 AND kind = 'credit_draw'`, [vmId]))[0].cents;
  const meteredUntil = async (vmId: string) =>
    (await server.services.db.query<{ metered_until: Date | null }>('SELECT metered_until FROM vms WHERE vm_id = $1', [vmId]))[0].metered_until;

  before(async () => {
    // The starter shape's golden VM: the first VM resumes it (its RAM that memory, copy-on-write).
    t = await startVmTestServer('suspend', { credits: 10_000, config: { meterIntervalMs: 1000 }, prewarmed: true });
    ({ server, dataDir, admin, api } = t);
  });

  after(async () => {
    await t?.close();
  });

  test('suspended in the middle of a run: no QEMU, no credits drawn; started, the run goes on and ends whole', { timeout: 10 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { tier: 'ondemand', harness: 'ticker' })).body.vm_id;
    await untilStatus(vmId, 'running');
    const startedFrom = server.host.driver!.startedFrom(vmId);
    // Memory only: a tmpfs of its own, and a process that sleeps.
    await sh(vmId, 'mkdir -p /mnt/mem && mount -t tmpfs mem /mnt/mem && echo kept-in-memory > /mnt/mem/marker && echo on-disk > /persist/marker && sync');
    // 40 MB of memory no golden VM had (about 10,000 pages: the saved state is written and loaded in pieces).
    const filled = await sh(vmId, 'head -c 40000000 /dev/urandom > /mnt/mem/fill && md5sum < /mnt/mem/fill', 120_000);
    const sleeper = await sh(vmId, `${detached('sleep 7777 >/dev/null 2>&1')}; pgrep -x -f "sleep 7777"`);
    assert.match(sleeper, /^\d+$/);
    const bootsBefore = (await server.services.db.query<{ boots: number }>('SELECT boots FROM vms WHERE vm_id = $1', [vmId]))[0].boots;

    const lines = Array.from({ length: 15 }, (_, i) => `tick ${i + 1}`);
    const run = (await api('POST', `/v1/api/vms/${vmId}/run`, { task: lines.join('\n') }, { Prefer: 'respond-async' })).body;
    await until('three lines stored', async () => {
      const [r] = await server.services.db.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE run_id = $1', [run.run_id]);
      return r.last_seq >= 3;
    }, 120_000);

    const suspending = await api('POST', `/v1/api/vms/${vmId}/suspend`);
    assert.equal(suspending.status, 200);
    assert.equal(suspending.body.status, 'suspending');
    const suspended = await untilStatus(vmId, 'suspended');
    assert.equal(suspended.status_reason, null);
    assert.deepEqual(await qemuPidsUnder(vmDir(vmId)), [], 'its QEMU is gone');
    assert.ok(existsSync(path.join(vmDir(vmId), 'suspend.json')), 'its saved state is recorded');
    // Resumed from its shape's golden VM (or a standby of it), its RAM was that memory mapped
    // copy-on-write: only the pages it changed are saved, over that memory linked beside them.
    assert.notEqual(startedFrom, 'cold');
    const record = JSON.parse(await readFile(path.join(vmDir(vmId), 'suspend.json'), 'utf8'));
    assert.equal(record.base_bytes, 1024 * 1024 * 1024);
    assert.equal(record.kind, 'pages');
    // A part of its 262,144 pages (the golden VM's kernel and page cache are the base's), and the
    // state is those pages and its devices.
    assert.ok(record.pages.changed > 40_000_000 / 4096 && record.pages.changed < 65_536, JSON.stringify(record.pages));
    assert.ok(record.bytes < record.pages.changed * 4096 + (1 << 20), `${record.bytes} bytes for ${record.pages.changed} pages`);
    assert.equal((await stat(path.join(vmDir(vmId), 'ram.base'))).size, record.base_bytes);
    assert.equal(await meteredUntil(vmId), null, 'not metered while suspended');
    // Suspend of a suspended VM: 200, nothing changes.
    const again = await api('POST', `/v1/api/vms/${vmId}/suspend`);
    assert.equal(again.status, 200);
    assert.equal(again.body.status, 'suspended');
    const drawn = await drawnFor(vmId);
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(await drawnFor(vmId), drawn, 'nothing drawn while suspended');
    assert.equal((await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body.status, 'running', 'the run waits with its VM');

    const started = await api('POST', `/v1/api/vms/${vmId}/start`);
    assert.equal(started.status, 200);
    assert.equal(started.body.status, 'starting');
    const running = await untilStatus(vmId, 'running');
    assert.equal(running.status_reason, null);
    assert.equal(server.host.driver!.startedFrom(vmId), 'suspended');
    assert.ok(!existsSync(path.join(vmDir(vmId), 'suspend.json')), 'the saved state is forgotten once the guest runs on');
    assert.ok(await meteredUntil(vmId), 'metered again while running');

    const finished = await until('the run finished', async () => {
      const r = (await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body;
      return r.status !== 'queued' && r.status !== 'running' ? r : undefined;
    }, 120_000);
    assert.equal(finished.status, 'succeeded', finished.status_reason);
    assert.equal(finished.stdout, `${lines.join('\n')}\n`, 'every line once, in order');
    assert.equal(await sh(vmId, 'cat /mnt/mem/marker'), 'kept-in-memory', 'its memory was kept');
    assert.equal(await sh(vmId, 'md5sum < /mnt/mem/fill', 120_000), filled, 'every page of it');
    assert.match(await sh(vmId, `tr '\\0' ' ' < /proc/${sleeper}/cmdline`), /^sleep 7777/, 'its processes live on');
    const guestNow = Number(await sh(vmId, 'date +%s'));
    assert.ok(Math.abs(guestNow * 1000 - Date.now()) < 5000, `the guest's clock is now (${guestNow})`);
    const bootsAfter = (await server.services.db.query<{ boots: number }>('SELECT boots FROM vms WHERE vm_id = $1', [vmId]))[0].boots;
    assert.equal(bootsAfter, bootsBefore, 'resumed, not booted');

    // Stop of a suspended VM discards its memory; its disk stays.
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    await untilStatus(vmId, 'suspended');
    // Its RAM now maps the same base: the second suspend is a difference over it too.
    const second = JSON.parse(await readFile(path.join(vmDir(vmId), 'suspend.json'), 'utf8'));
    assert.equal(second.base_bytes, record.base_bytes);
    assert.equal(second.kind, 'pages');
    assert.ok(second.pages.changed >= record.pages.changed, JSON.stringify(second.pages));
    await api('POST', `/v1/api/vms/${vmId}/stop`);
    await untilStatus(vmId, 'stopped');
    assert.ok(!existsSync(path.join(vmDir(vmId), 'suspend.state')), 'stop discards the saved memory');
    assert.ok(!existsSync(path.join(vmDir(vmId), 'ram.base')), 'and the memory it was over');
    await api('POST', `/v1/api/vms/${vmId}/start`);
    await untilStatus(vmId, 'running');
    assert.equal(server.host.driver!.startedFrom(vmId) === 'suspended', false, 'a stopped VM boots');
    assert.equal(await sh(vmId, 'cat /persist/marker'), 'on-disk');
    assert.equal(await sh(vmId, 'cat /mnt/mem/marker 2>/dev/null || echo gone'), 'gone');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });

  test('a damaged saved state: the start boots fresh from the disks, says so, and the persist disk is intact', { timeout: 10 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id;
    await untilStatus(vmId, 'running');
    await sh(vmId, 'echo before-suspend > /persist/work.txt && mkdir -p /mnt/mem && mount -t tmpfs mem /mnt/mem && echo mem > /mnt/mem/marker');
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    await untilStatus(vmId, 'suspended');
    // Bytes in the middle of the saved memory overwritten: QEMU alone would load them.
    const state = path.join(vmDir(vmId), 'suspend.state');
    const { size } = await stat(state);
    const fh = await open(state, 'r+');
    await fh.write(Buffer.alloc(4096, 0xa5), 0, 4096, Math.floor(size / 2));
    await fh.close();

    await api('POST', `/v1/api/vms/${vmId}/start`);
    const running = await untilStatus(vmId, 'running');
    assert.match(running.status_reason ?? '', /saved memory could not be restored.*booted fresh from its disks/);
    assert.notEqual(server.host.driver!.startedFrom(vmId), 'suspended');
    assert.equal(await sh(vmId, 'cat /persist/work.txt'), 'before-suspend', 'the persist disk is intact');
    assert.equal(await sh(vmId, 'cat /mnt/mem/marker 2>/dev/null || echo gone'), 'gone', 'a fresh boot');
    assert.ok(!existsSync(state), 'the damaged state is removed');

    // Restart of a suspended VM discards its memory too.
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    await untilStatus(vmId, 'suspended');
    await api('POST', `/v1/api/vms/${vmId}/restart`);
    const restarted = await untilStatus(vmId, 'running');
    assert.equal(restarted.status_reason, null);
    assert.notEqual(server.host.driver!.startedFrom(vmId), 'suspended');
    assert.ok(!existsSync(path.join(vmDir(vmId), 'suspend.json')));
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });

  test('idle stop: a VM suspended for longer than its auto_stop_after_s is not stopped when started; its idle clock starts at the start', { timeout: 10 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'echo', auto_stop_after_s: 60 })).body.vm_id;
    await untilStatus(vmId, 'running');
    await sh(vmId, 'mkdir -p /mnt/mem && mount -t tmpfs mem /mnt/mem && echo kept-in-memory > /mnt/mem/marker');
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    await untilStatus(vmId, 'suspended');
    // Suspended for two hours: everything that counts as its last activity is that old.
    await server.services.db.query(
      `UPDATE vms SET created_at = created_at - interval '2 hours', booted_at = booted_at - interval '2 hours',
         last_activity_at = last_activity_at - interval '2 hours' WHERE vm_id = $1`,
      [vmId],
    );
    assert.deepEqual(await server.services.vms.stopIdle(), [], 'a suspended VM is not stopped for idleness');
    await api('POST', `/v1/api/vms/${vmId}/start`);
    await untilStatus(vmId, 'running');
    assert.equal(server.host.driver!.startedFrom(vmId), 'suspended');
    assert.deepEqual(await server.services.vms.stopIdle(), [], 'the time it was suspended is not idle time');
    const v = await vm(vmId);
    assert.equal(v.status, 'running', `${v.status} ${v.status_reason}`);
    assert.equal(await sh(vmId, 'cat /mnt/mem/marker'), 'kept-in-memory');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });

  test('QEMU killed in the middle of a suspend: failed with the reason, nothing of the half-saved state kept; started, it boots fresh with its persist disk', { timeout: 10 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id;
    await untilStatus(vmId, 'running');
    // Its RAM maps a memory file: the suspend saves a page file, read from QEMU's memory by this process.
    assert.notEqual(server.host.driver!.startedFrom(vmId), 'cold');
    // 100 MB of memory no golden VM had: the page file is written in pieces, giving way every 8 MiB.
    await sh(vmId, 'echo kept > /persist/kill.txt && sync && mkdir -p /mnt/mem && mount -t tmpfs mem /mnt/mem && head -c 100000000 /dev/urandom > /mnt/mem/fill', 120_000);
    const [pid] = await qemuPidsUnder(vmDir(vmId));
    const state = path.join(vmDir(vmId), 'suspend.state');
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    // Looked at between the save's pieces (it runs in this process): the first bytes seen, most of it is still to be read.
    let written = 0;
    for (const end = Date.now() + 120_000; written === 0 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 1));
      written = statSync(state, { throwIfNoEntry: false })?.size ?? 0;
    }
    assert.ok(written > 0 && written < 50_000_000, `killed in the middle of the save (${written} bytes of over 100 MB written)`);
    assert.ok(!existsSync(path.join(vmDir(vmId), 'suspend.json')));
    process.kill(pid, 'SIGKILL');
    // Nothing else runs here until its memory is gone: the save's next read finds no QEMU.
    for (const end = Date.now() + 10_000; Date.now() < end; Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)) {
      const stat = (() => { try { return readFileSync(`/proc/${pid}/stat`, 'utf8'); } catch { return ''; } })();
      if (!stat || /\) [ZX] /.test(stat)) break;
    }
    const after = await until('a settled status', async () => {
      const v = await vm(vmId);
      return v.status !== 'suspending' ? v : undefined;
    }, 120_000);
    assert.equal(after.status, 'failed', `${after.status}: ${after.status_reason}`);
    assert.match(after.status_reason ?? '', /suspend/, 'the reason names the suspend');
    assert.ok(!existsSync(path.join(vmDir(vmId), 'suspend.json')), 'no record of a half-written state');
    assert.ok(!existsSync(state), 'and not the half-written state either');
    assert.deepEqual(await qemuPidsUnder(vmDir(vmId)), []);
    await api('POST', `/v1/api/vms/${vmId}/start`);
    const v = await untilStatus(vmId, 'running');
    assert.notEqual(server.host.driver!.startedFrom(vmId), 'suspended', `booted from its disks (${v.status_reason})`);
    assert.equal(await sh(vmId, 'cat /persist/kill.txt'), 'kept', 'the persist disk is intact');
    assert.equal(await sh(vmId, 'cat /mnt/mem/fill >/dev/null 2>&1 && echo kept || echo gone'), 'gone', 'a fresh boot');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });

  test('bad requests: not running → 409, read key → 403, another tenant → 404; nothing changes', { timeout: 5 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id;
    await untilStatus(vmId, 'running');
    await api('POST', `/v1/api/vms/${vmId}/stop`);
    await untilStatus(vmId, 'stopped');
    const refused = await api('POST', `/v1/api/vms/${vmId}/suspend`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error, 'vm_not_running');
    assert.match(refused.body.message, /stopped/);
    assert.equal((await vm(vmId)).status, 'stopped');

    const readKey = (await api('POST', '/v1/api/keys', { label: 'read' })).body.key;
    const reader = apiClient(server.url, readKey);
    assert.equal((await reader('POST', `/v1/api/vms/${vmId}/suspend`)).status, 403);
    const other = (await admin('POST', '/v1/admin/tenants', { email: 'other-suspend@example.com' })).body;
    const otherApi = apiClient(server.url, other.api_key);
    const notFound = await otherApi('POST', `/v1/api/vms/${vmId}/suspend`);
    assert.equal(notFound.status, 404);
    assert.equal(notFound.body.error, 'not_found');
    assert.equal((await vm(vmId)).status, 'stopped');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });
});

describe('a suspend outlives a kill -9 of its server', { skip }, () => {
  let dataDir: string;
  let proc: ChildProcess | null = null;
  let url = '';

  async function startProcess(): Promise<void> {
    ({ proc, url } = await spawnServer(dataDir, { AGENTVM_ADMIN_TOKEN: ADMIN, AGENTVM_IMAGE_DIR: imageDir!, AGENTVM_IMAGE_BUILD: 'off', AGENTVM_LOG_LEVEL: 'info' }));
  }

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-suspend-kill-'));
  });

  after(async () => {
    await endServer(proc);
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('kill -9 of the server in the middle of a suspend: after the restart the VM is suspended whole (saved again, or the record it had), and its run ends whole', { timeout: 10 * 60_000 }, async () => {
    await startProcess();
    const call = (key: string): ApiCall => apiClient(() => url, key);
    const admin = call(ADMIN);
    await until('ready', async () => (await fetch(`${url}/readyz`)).status === 200);
    const tenant = (await admin('POST', '/v1/admin/tenants', { email: 'suspend-kill@example.com' })).body;
    await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const api = call(tenant.api_key);
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'ticker' })).body.vm_id;
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running', 5 * 60_000);
    const dir = path.join(dataDir, 'vms', vmId);
    // 32 MiB in the guest's page cache: pages the save has to write, so that it takes a while.
    const upload = await fetch(`${url}/v1/api/vms/${vmId}/files?path=fill.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/octet-stream' },
      body: randomBytes(32 * 1024 * 1024),
    });
    assert.ok(upload.ok, `upload: ${upload.status}`);
    const want = Array.from({ length: 12 }, (_, i) => `kept ${i + 1}`);
    const run = (await api('POST', `/v1/api/vms/${vmId}/run`, { task: want.join('\n') }, { Prefer: 'respond-async' })).body;
    await until('two lines', async () => ((await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body.stdout ?? '').split('\n').length > 2, 120_000);

    assert.equal((await api('POST', `/v1/api/vms/${vmId}/suspend`)).status, 200);
    // The server is frozen the moment its save has begun, then killed: what is on disk is what it left.
    for (const end = Date.now() + 60_000; !existsSync(path.join(dir, 'suspend.state')) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 2));
    proc!.kill('SIGSTOP');
    const gone = new Promise((r) => proc!.once('exit', r));
    proc!.kill('SIGKILL');
    await gone;
    const atKill = await readFile(path.join(dir, 'suspend.json'), 'utf8').then(JSON.parse, () => null);
    if (atKill) assert.equal(createHash('sha256').update(await readFile(path.join(dir, 'suspend.state'))).digest('hex'), atKill.sha256, 'a record names a whole state');
    process.stderr.write(`server killed ${atKill ? 'after its save was recorded' : 'in the middle of its save'}\n`);
    await startProcess();

    const settled = await until('suspended again', async () => {
      const v = (await api('GET', `/v1/api/vms/${vmId}`).catch(() => null))?.body;
      if (v?.status === 'failed') throw new Error(`failed: ${v.status_reason}`);
      return v?.status === 'suspended' ? v : undefined;
    }, 5 * 60_000).catch(async (err) => assert.fail(`${err.message}; now ${JSON.stringify((await api('GET', `/v1/api/vms/${vmId}`)).body)}`));
    assert.equal(settled.status, 'suspended');
    const record = JSON.parse(await readFile(path.join(dir, 'suspend.json'), 'utf8'));
    assert.equal(createHash('sha256').update(await readFile(path.join(dir, 'suspend.state'))).digest('hex'), record.sha256, 'suspended whole');
    if (atKill) assert.equal(record.sha256, atKill.sha256, 'the state recorded before the kill is the one kept');
    else assert.ok(Date.parse(record.saved_at) > 0, 'the guest ran on and was saved again');
    assert.deepEqual(await qemuPidsUnder(dir), [], 'no QEMU while suspended');

    await api('POST', `/v1/api/vms/${vmId}/start`);
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running', 5 * 60_000);
    const done = await until('the run ends', async () => {
      const r = (await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body;
      return !['queued', 'running'].includes(r.status) && r;
    }, 120_000);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.equal(done.stdout, `${want.join('\n')}\n`, 'every line once, in order');
  });
});

// A VM booted cold (no golden snapshot) has RAM of its own, not a file's: its suspend saves QEMU's
// whole migration stream instead of changed pages, and it resumes from that.
describe('suspend of a VM booted cold', { skip }, () => {
  let t: VmTestServer;
  let dataDir: string;
  let server: RunningServer;
  let api: ApiCall;

  before(async () => {
    t = await startVmTestServer('suspend-cold', { config: { snapshots: false, standbyVms: 0 }, seed: false });
    ({ server, dataDir, api } = t);
  });

  after(async () => {
    await t?.close();
  });

  test('saved as a stream, resumed with its memory', { timeout: 10 * 60_000 }, async () => {
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id;
    const status = (want: string) =>
      until(`${vmId} ${want}`, async () => {
        const v = (await api('GET', `/v1/api/vms/${vmId}`)).body;
        if (v.status === 'failed') throw new Error(`failed: ${v.status_reason}`);
        return v.status === want ? v : undefined;
      }, 5 * 60_000);
    await status('running');
    assert.equal(server.host.driver!.startedFrom(vmId), 'cold');
    const sh = async (script: string) => (await server.host.driver!.exec(vmId, { argv: ['sh', '-c', script] }, 20_000)).stdout.trim();
    await sh('mkdir -p /mnt/mem && mount -t tmpfs mem /mnt/mem && echo cold-memory > /mnt/mem/marker');
    await api('POST', `/v1/api/vms/${vmId}/suspend`);
    await status('suspended');
    const record = JSON.parse(await readFile(path.join(dataDir, 'vms', vmId, 'suspend.json'), 'utf8'));
    assert.equal(record.kind, 'stream');
    assert.equal(record.base_bytes, undefined, 'no memory file to be a difference over');
    await api('POST', `/v1/api/vms/${vmId}/start`);
    assert.equal((await status('running')).status_reason, null);
    assert.equal(server.host.driver!.startedFrom(vmId), 'suspended');
    assert.equal(await sh('cat /mnt/mem/marker'), 'cold-memory');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });
});
