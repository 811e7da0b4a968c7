/**
 * Several machines on this one: two API replicas and three VM hosts as separate processes on loopback
 * ports, each with its own data dir, all on one PostgreSQL database. Needs the PostgreSQL server and
 * the guest image of `npm run test:all` (AGENTVM_TEST_DATABASE_URL, AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { randomBase62 } from '../src/domain/ids.ts';
import { freePort, killQemusUnder, qemuPidsUnder, seedSnapshots, until, vmQemuPidsUnder } from './helpers.ts';
import { readRunStream } from '../src/client/runEvents.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const pgUrl = process.env.AGENTVM_TEST_DATABASE_URL;
const skip = imageDir && pgUrl ? false : 'needs AGENTVM_TEST_IMAGE_DIR and AGENTVM_TEST_DATABASE_URL (npm run test:all sets both)';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const ADMIN = 'avm_admin_scaleout_0123456789abcdefghijklmn';
const INTERNAL = `avm_internal_${randomBase62(32)}`;

describe('several hosts and API replicas on one PostgreSQL', { skip }, () => {
  let work: string;
  let dbUrl: string;
  let db: pg.Client;
  const dbName = `agentvm_scaleout_${randomBase62(10).toLowerCase()}`;
  const procs = new Map<string, { proc: ChildProcess; port: number; dir: string }>();
  let seeded = false;

  const env = () => ({
    ...process.env,
    DATABASE_URL: dbUrl,
    AGENTVM_INTERNAL_TOKEN: INTERNAL,
    AGENTVM_ADMIN_TOKEN: ADMIN,
    AGENTVM_IMAGE_DIR: imageDir!,
    AGENTVM_IMAGE_BUILD: 'off',
    // VMs resume from the run's golden snapshot (scripts/test-all.sh makes it once; seedSnapshots),
    // with no standbys; without one, each host would make its own, so they boot cold.
    AGENTVM_SNAPSHOTS: seeded ? 'on' : 'off',
    AGENTVM_STANDBY_VMS: '0',
    AGENTVM_HOST_STALE_S: '3',
    AGENTVM_METER_INTERVAL_S: '1',
    AGENTVM_TEMPLATE_DIR: path.join(work, 'templates'),
    AGENTVM_LOG_LEVEL: 'warn',
    AGENTVM_EGRESS_HOSTS: 'site.test=127.0.0.1',
  });

  async function start(name: string, args: string[], ready = '/readyz'): Promise<void> {
    const known = procs.get(name);
    const port = known?.port ?? (await freePort());
    const dir = known?.dir ?? path.join(work, name);
    if (!known && args[0] === 'host') seeded = await seedSnapshots(dir);
    const proc = spawn(process.execPath, [path.join(root, 'bin/agentvm.js'), ...args, '--port', String(port), '--data-dir', dir], {
      env: env(),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    procs.set(name, { proc, port, dir });
    await until(`${name} ready`, async () => (await fetch(`http://127.0.0.1:${port}${ready}`)).status === 200, 90_000);
  }

  async function kill9(name: string): Promise<void> {
    const p = procs.get(name)!;
    p.proc.kill('SIGKILL');
    if (p.proc.exitCode === null && p.proc.signalCode === null) await new Promise((r) => p.proc.once('exit', r));
  }

  const call = (replica: string, key: string) => async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`http://127.0.0.1:${procs.get(replica)!.port}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  before(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'agentvm-scaleout-'));
    const admin = new pg.Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const u = new URL(pgUrl!);
    u.pathname = `/${dbName}`;
    dbUrl = u.toString();
    db = new pg.Client({ connectionString: dbUrl });
  });

  after(async () => {
    for (const { proc } of procs.values()) if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await killQemusUnder(work);
    await db.end().catch(() => undefined);
    const admin = new pg.Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    await rm(work, { recursive: true, force: true });
  });

  test('VMs spread over hosts, any replica answers, a lost host comes back without charging the lost time, templates fork across hosts, a drained host takes nothing, a replica killed mid-create charges once', { timeout: 10 * 60_000 }, async (t) => {
    // The first replica makes the schema; then the hosts register.
    await start('api1', ['serve', '--role', 'api'], '/healthz');
    await db.connect();
    for (const h of ['host1', 'host2', 'host3']) await start(h, ['host']);
    await start('api2', ['serve', '--role', 'api']);

    const admin = call('api1', ADMIN);
    const tenant = (await admin('POST', '/v1/admin/tenants', { email: 'scale@example.com' })).body;
    await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const a1 = call('api1', tenant.api_key);
    const a2 = call('api2', tenant.api_key);

    // Three VMs through one replica: one per host (placement takes the host with the most room).
    const vms: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await a1('POST', '/v1/api/vms', { harness: 'echo' });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      vms.push(r.body.vm_id);
    }
    const placed = await db.query<{ vm_id: string; host_id: string }>('SELECT vm_id, host_id FROM vms ORDER BY created_at');
    assert.equal(new Set(placed.rows.map((r) => r.host_id)).size, 3, 'one VM on each host');
    const hostOf = new Map(placed.rows.map((r) => [r.vm_id, r.host_id]));
    const hostIds = new Map<string, string>();
    for (const h of ['host1', 'host2', 'host3']) hostIds.set(h, (await readFile(path.join(procs.get(h)!.dir, 'host-id'), 'utf8')).trim());

    // The other replica sees them run, and runs tasks on each (forwarded to the VM's host).
    for (const vmId of vms) {
      await until(`${vmId} running`, async () => {
        const vm = (await a2('GET', `/v1/api/vms/${vmId}`)).body;
        if (vm.status === 'failed') throw new Error(vm.status_reason);
        return vm.status === 'running';
      });
      const run = await a2('POST', `/v1/api/vms/${vmId}/run`, { task: `hello ${vmId}` });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(JSON.parse(run.body.stdout).task, `hello ${vmId}`);
    }

    // Egress: a policy set through either replica is what the VM's host's gateway applies to the next
    // connection. (Spoken to on the VM's gateway socket, as QEMU's forward does; the site is on loopback.)
    const site = http.createServer((_req, res) => res.end('site'));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const sitePort = (site.address() as net.AddressInfo).port;
    // Closed whatever happens: a server left listening keeps the test's process from ending.
    t.after(() => {
      site.closeAllConnections();
      site.close();
    });
    const hostName = [...hostIds].find(([, id]) => id === hostOf.get(vms[0]))![0];
    const hostDir = procs.get(hostName)!.dir;
    const connectStatus = () =>
      new Promise<string>((resolve, reject) => {
        const s = net.connect(path.join(hostDir, 'vms', vms[0], 'egress.sock'), () => s.write(`CONNECT site.test:${sitePort} HTTP/1.1\r\n\r\n`));
        s.once('data', (d) => (resolve(d.toString().slice(9, 12)), s.destroy()));
        s.once('error', reject);
      });
    assert.equal(await connectStatus(), '403', "echo's default allowlist is empty");
    assert.equal((await a2('PUT', `/v1/api/vms/${vms[0]}/egress`, { mode: 'allowlist', allow: ['site.test'] })).status, 200);
    assert.equal(await connectStatus(), '200', 'the change through one replica is live on the host at once');
    assert.equal((await a1('PUT', `/v1/api/vms/${vms[0]}/egress`, { mode: 'none', allow: [] })).status, 200);
    assert.equal(await connectStatus(), '403', 'and so is one through the other');
    // The gateway answers a connection before its log row is written (the row is not waited for).
    const decisions = async () => (await a1('GET', `/v1/api/vms/${vms[0]}/egress/log`)).body.data.map((e: { decision: string }) => e.decision);
    await until('three connections logged', async () => (await decisions()).length >= 3);
    assert.deepEqual(await decisions(), ['denied', 'allowed', 'denied']);

    // An on-demand VM on the host about to be lost: its running time is metered, the lost time not.
    await admin('POST', `/v1/admin/tenants/${tenant.tenant_id}/credits`, { amount_cents: 1000 });
    await db.query('UPDATE hosts SET draining = host_id <> $1', [hostIds.get('host1')]);
    const tierVm = (await a1('POST', '/v1/api/vms', { harness: 'echo', tier: 'ondemand' })).body.vm_id as string;
    await db.query('UPDATE hosts SET draining = false');
    await until('the on-demand VM running', async () => (await a2('GET', `/v1/api/vms/${tierVm}`)).body.status === 'running');
    /**
     * Metering against the platform's own records, in the database's clock: the time metered so far
     * (drawn, plus pending) must be the VM's running time since it booted less its host's recorded
     * loss window. A draw after the last heartbeat before the loss may shorten the forgiven window by
     * up to one meter interval (1 s here), never lengthen it.
     */
    const metering = async () => {
      const { rows } = await db.query<{ metered: number; running: number; lost: number }>(
        `SELECT v.unbilled_ms + extract(epoch FROM (now() - v.metered_until)) * 1000 AS metered,
                extract(epoch FROM (now() - v.booted_at)) * 1000 AS running,
                coalesce(extract(epoch FROM (h.lost_until - h.lost_from)) * 1000, 0) AS lost
         FROM vms v JOIN hosts h ON h.host_id = v.host_id WHERE v.vm_id = $1`,
        [tierVm],
      );
      return { metered: Number(rows[0].metered), running: Number(rows[0].running), lost: Number(rows[0].lost) };
    };

    // kill -9 of one host: its VM shows host_unavailable; the others run on.
    const lostVm = vms.find((v) => hostOf.get(v) === hostIds.get('host1'))!;
    const otherVm = vms.find((v) => v !== lostVm)!;
    // A 20-line ticker run on that VM, cut by the kill: its host follows it again once back. (Its
    // command goes straight into the runs table: the VM's harness is echo.)
    const ticks = Array.from({ length: 20 }, (_, i) => `tick ${i + 1}`);
    const runId = `run_${randomBase62(22)}`;
    const { rows: [owner] } = await db.query<{ tenant_id: string; boots: number }>('SELECT tenant_id, boots FROM vms WHERE vm_id = $1', [lostVm]);
    await db.query(
      `INSERT INTO runs (run_id, tenant_id, vm_id, status, task, harness, argv, env, timeout_ms, max_output_bytes, boots, created_at)
       VALUES ($1, $2, $3, 'queued', 'ticks', 'echo', $4, '{}', 120000, 4194304, $5, now())`,
      [runId, owner.tenant_id, lostVm, JSON.stringify(['agentvm-ticker', ticks.join('\n')]), owner.boots],
    );
    await until('three ticks stored', async () => ((await a1('GET', `/v1/api/vms/${lostVm}/runs/${runId}`)).body.stdout ?? '').split('\n').length > 3, 60_000);
    await kill9('host1');
    await until('the lost host shown', async () => (await a1('GET', `/v1/api/vms/${lostVm}`)).body.status_reason === 'host_unavailable', 30_000);
    assert.equal((await a1('GET', `/v1/api/vms/${otherVm}`)).body.status_reason, null);
    assert.equal((await a2('POST', `/v1/api/vms/${otherVm}/run`, { task: 'still here' })).status, 200);
    const lostRun = await a2('POST', `/v1/api/vms/${lostVm}/run`, { task: 'nobody home' });
    assert.equal(lostRun.status, 409);
    // Its QEMU lives on (a host's VMs outlive the host process); back, the host re-adopts it.
    await start('host1', ['host']);
    await until('the host back', async () => (await a1('GET', `/v1/api/vms/${lostVm}`)).body.status_reason === null, 30_000);
    const m = await metering();
    const why = `metered ${Math.round(m.metered)} ms of ${Math.round(m.running)} ms running, ${Math.round(m.lost)} ms of it lost`;
    assert.ok(m.lost > 3000, `the host's loss is recorded: ${why}`);
    // Slack for the moments between booted_at and the start of metering, however slow the machine; the
    // bug this catches (charging the loss) is off by the whole loss, over 3 s.
    assert.ok(m.metered >= m.running - m.lost - 1000, why);
    assert.ok(m.metered <= m.running - m.lost + 2000, why);
    // The run cut by the kill ends as it would have: every line, once, in order; an API replica's
    // event stream (the host's news reaches it by NOTIFY) replays them.
    const ticked = await until('the cut run ends', async () => {
      const r = (await a2('GET', `/v1/api/vms/${lostVm}/runs/${runId}`)).body;
      return !['queued', 'running'].includes(r.status) && r;
    }, 90_000);
    assert.equal(ticked.status, 'succeeded', JSON.stringify(ticked));
    assert.equal(ticked.stdout, `${ticks.join('\n')}\n`);
    const seen: string[] = [];
    const end = await readRunStream(
      { baseUrl: `http://127.0.0.1:${procs.get('api1')!.port}`, key: tenant.api_key, vmId: lostVm, runId, after: 0, onOutput: (o) => seen.push(o.text) },
      () => undefined,
    );
    // Output events are chunks as they came (two lines that came together are one event): the lines in them, each once, in order.
    assert.equal(seen.join(''), ticks.map((t) => `${t}\n`).join(''));
    assert.equal(end?.status, 'succeeded');
    const back = await a1('POST', `/v1/api/vms/${lostVm}/run`, { task: 'back again' });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal((await qemuPidsUnder(path.join(procs.get('host1')!.dir, 'vms', lostVm))).length, 1);

    // A template captured on one host (through a replica) and forked onto whichever host has room:
    // the template store is shared, so the fork's persist disk starts as the capture.
    const tpl = await a2('POST', `/v1/api/vms/${otherVm}/capture`, { visibility: 'private', name: 'across hosts' });
    assert.equal(tpl.status, 201, JSON.stringify(tpl.body));
    await until('the template ready', async () => {
      const t = (await a1('GET', `/v1/api/templates/${tpl.body.template_id}`)).body;
      if (t.status === 'failed') throw new Error('the capture failed');
      return t.status === 'ready';
    });
    const fork = await a1('POST', `/v1/api/templates/${tpl.body.template_id}/fork`, {});
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    await until('the fork running', async () => (await a2('GET', `/v1/api/vms/${fork.body.vm_id}`)).body.status === 'running');
    const forkRun = await a2('POST', `/v1/api/vms/${fork.body.vm_id}/run`, { task: 'forked' });
    assert.equal(forkRun.status, 200, JSON.stringify(forkRun.body));
    assert.equal(JSON.parse(forkRun.body.stdout).persist_runs, 3); // two runs on the source, then this one

    // Branches and snapshots through a replica: the steps on the VM's host (the internal endpoint), the
    // new VMs placed there, each with the VM's disk at the instant.
    const forkHost = (await db.query<{ host_id: string }>('SELECT host_id FROM vms WHERE vm_id = $1', [fork.body.vm_id])).rows[0].host_id;
    const branched = await a2('POST', `/v1/api/vms/${fork.body.vm_id}/branch`, {}, { 'idempotency-key': 'scaleout-branch' });
    assert.equal(branched.status, 201, JSON.stringify(branched.body));
    const snap = await a1('POST', `/v1/api/vms/${fork.body.vm_id}/snapshots`, { name: 'across replicas' });
    assert.equal(snap.status, 201, JSON.stringify(snap.body));
    const fromSnap = await a2('POST', `/v1/api/snapshots/${snap.body.snapshot_id}/vms`, {});
    assert.equal(fromSnap.status, 201, JSON.stringify(fromSnap.body));
    const madeFrom = [branched.body.vm_ids[0], fromSnap.body.vm_ids[0]];
    for (const vmId of madeFrom) {
      assert.equal((await db.query<{ host_id: string }>('SELECT host_id FROM vms WHERE vm_id = $1', [vmId])).rows[0].host_id, forkHost, 'on the host of its VM');
      await until(`${vmId} running`, async () => {
        const vm = (await a1('GET', `/v1/api/vms/${vmId}`)).body;
        if (vm.status === 'failed') throw new Error(vm.status_reason);
        return vm.status === 'running';
      });
      const r = await a1('POST', `/v1/api/vms/${vmId}/run`, { task: 'from the instant' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(JSON.parse(r.body.stdout).persist_runs, 4, "the fork's three runs, then this one");
    }
    assert.equal((await a1('DELETE', `/v1/api/snapshots/${snap.body.snapshot_id}`)).status, 200);

    // A drained host takes no new VM.
    await promisify(execFile)(process.execPath, [path.join(root, 'bin/agentvm.js'), 'host', 'drain', '--data-dir', procs.get('host3')!.dir], { env: env() });
    const after = [];
    for (let i = 0; i < 2; i++) after.push((await a2('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id);
    const drainedHost = hostIds.get('host3');
    for (const vmId of after) {
      const { rows } = await db.query<{ host_id: string }>('SELECT host_id FROM vms WHERE vm_id = $1', [vmId]);
      assert.notEqual(rows[0].host_id, drainedHost);
    }

    // A replica killed while it creates: the client's retry with the same key on the other is one VM, one charge.
    const key = 'scaleout-once';
    const body = JSON.stringify({ harness: 'echo' });
    void fetch(`http://127.0.0.1:${procs.get('api1')!.port}/v1/api/vms`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json', 'idempotency-key': key },
      body,
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 5));
    await kill9('api1');
    const retry = await a2('POST', '/v1/api/vms', { harness: 'echo' }, { 'idempotency-key': key });
    assert.equal(retry.status, 201, JSON.stringify(retry.body));
    const again = await a2('POST', '/v1/api/vms', { harness: 'echo' }, { 'idempotency-key': key });
    assert.equal(again.body.vm_id, retry.body.vm_id);
    const { rows: charges } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ledger WHERE kind = 'card_charge' AND vm_id = $1`,
      [retry.body.vm_id],
    );
    assert.equal(charges[0].n, 1);
    const { rows: total } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM vms WHERE tenant_id = $1`, [tenant.tenant_id]);
    assert.equal(total[0].n, vms.length + after.length + 3 + madeFrom.length);

    for (const vmId of [...vms, tierVm, fork.body.vm_id, ...madeFrom, ...after, retry.body.vm_id]) await a2('DELETE', `/v1/api/vms/${vmId}`);
    await until("every VM's QEMU gone", async () => {
      const left = await vmQemuPidsUnder(work);
      if (left.length === 0) return true;
      // Named in the timeout's error: which machines are left, and whose rows they were.
      const names = await Promise.all(left.map(async (pid) => /-name\0([^\0]+)/.exec(await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => ''))?.[1] ?? String(pid)));
      const rows = (await db.query('SELECT vm_id, host_id, status, desired_state FROM vms WHERE vm_id = ANY($1)', [names])).rows;
      throw new Error(`left running: ${names.join(', ')}; rows: ${JSON.stringify(rows)}`);
    }, 60_000);
  });
});
