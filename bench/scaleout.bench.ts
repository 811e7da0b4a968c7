// Scale-out: two API replicas and three VM hosts (separate processes, loopback ports, one PostgreSQL
// started here). Creates fired at once through both replicas, first with only one host taking VMs
// (the others drained), then with all three: VMs accepted per second, and create → running p50.
// On one 2-core machine the three hosts share the same cores, so this measures the coordination
// (placement, leases, the hosts' loops), not more hardware. Needs QEMU, PostgreSQL and a built image.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pct, report, row } from './report.ts';
import { freePort, startPostgres } from './postgres.ts';

const N = Number(process.env.BENCH_SCALEOUT_VMS ?? 12);
const imageDir = process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images';
const ADMIN = 'avm_admin_bench_scaleout_0123456789abcdefgh';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pgServer = await startPostgres();
const work = await mkdtemp(path.join(os.tmpdir(), 'agentvm-scalebench-'));
const procs: ChildProcess[] = [];
const env = {
  ...process.env,
  DATABASE_URL: pgServer.url,
  AGENTVM_INTERNAL_TOKEN: 'avm_internal_bench_0123456789abcdefghijkl',
  AGENTVM_ADMIN_TOKEN: ADMIN,
  AGENTVM_IMAGE_DIR: imageDir,
  AGENTVM_IMAGE_BUILD: 'off',
  AGENTVM_TEMPLATE_DIR: path.join(work, 'templates'),
  AGENTVM_RATE_LIMIT: '1000000',
  AGENTVM_RATE_BURST: '1000000',
  AGENTVM_HOST_VCPUS: String(4 * N),
  AGENTVM_LOG_LEVEL: 'warn',
};
async function start(args: string[], dir: string, ready: string): Promise<string> {
  const port = await freePort();
  procs.push(spawn(process.execPath, ['bin/agentvm.js', ...args, '--port', String(port), '--data-dir', dir], { env, stdio: ['ignore', 'ignore', 'inherit'] }));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (i > 900) throw new Error(`${args.join(' ')} did not start`);
    if ((await fetch(`${url}${ready}`).then((r) => r.status, () => 0)) === 200) return url;
    await sleep(100);
  }
}
const db = new pg.Client({ connectionString: pgServer.url });
try {
  const replicas = [await start(['serve', '--role', 'api'], path.join(work, 'api1'), '/healthz')];
  await db.connect();
  const hostDirs = ['host1', 'host2', 'host3'].map((h) => path.join(work, h));
  for (const dir of hostDirs) await start(['host'], dir, '/readyz');
  replicas.push(await start(['serve', '--role', 'api'], path.join(work, 'api2'), '/readyz'));
  // Each host makes its starter snapshot once its image is ready; wait for all three.
  for (const dir of hostDirs) {
    for (let i = 0; ; i++) {
      const snaps = await readdir(path.join(dir, 'snapshots')).catch(() => [] as string[]);
      if (snaps.some((s) => existsSync(path.join(dir, 'snapshots', s, 'meta.json')))) break;
      if (i > 1200) throw new Error('no snapshot on a host');
      await sleep(100);
    }
  }
  const adminH = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  const tenant = await (await fetch(`${replicas[0]}/v1/admin/tenants`, { method: 'POST', headers: adminH, body: JSON.stringify({ email: 'scale@example.com' }) })).json();
  await fetch(`${replicas[0]}/v1/admin/tenants/${tenant.tenant_id}/card`, { method: 'PUT', headers: adminH, body: JSON.stringify({ brand: 'visa', last4: '4242' }) });
  const h = { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json' };
  const hostIds = (await db.query<{ host_id: string }>('SELECT host_id FROM hosts ORDER BY host_id')).rows.map((r) => r.host_id);

  async function phase(hosts: number): Promise<{ perSecond: number; running: number[] }> {
    await db.query('UPDATE hosts SET draining = NOT (host_id = ANY ($1))', [hostIds.slice(0, hosts)]);
    const t0 = performance.now();
    const created = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const base = replicas[i % replicas.length];
        const res = await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo' }) });
        const body = await res.json();
        if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(body)}`);
        return { base, vmId: body.vm_id as string, acceptedMs: performance.now() - t0 };
      }),
    );
    const perSecond = N / (Math.max(...created.map((c) => c.acceptedMs)) / 1000);
    const running = await Promise.all(
      created.map(async (c) => {
        for (;;) {
          const vm = await (await fetch(`${c.base}/v1/api/vms/${c.vmId}`, { headers: h })).json();
          if (vm.status === 'running') return performance.now() - t0;
          if (vm.status === 'failed') throw new Error(`${c.vmId} failed: ${vm.status_reason}`);
          await sleep(20);
        }
      }),
    );
    for (const c of created) await fetch(`${c.base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
    for (;;) {
      const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM vms WHERE disks_removed_at IS NULL');
      if (rows[0].n === 0) break;
      await sleep(200);
    }
    process.stderr.write(`  ${hosts} host(s): ${perSecond.toFixed(1)} creates/s accepted, running p50 ${pct(running, 50).toFixed(0)} ms\n`);
    return { perSecond, running };
  }
  await phase(3); // warm-up: the replicas' and the database's first requests are slow ones
  const one = await phase(1);
  const three = await phase(3);
  const p50 = (xs: number[]) => pct(xs, 50);
  await report(`Scale-out: 2 API replicas, ${N} creates at once through both, 1 host taking VMs vs 3 (one 2-core machine)`, [
    row('scale-out', 'creates accepted per second, 3 hosts', three.perSecond.toFixed(1), `${one.perSecond.toFixed(1)} with 1 host`, three.perSecond / one.perSecond),
    row('scale-out', `create → running p50 of ${N} at once, 3 hosts`, `${p50(three.running).toFixed(0)} ms`, `${p50(one.running).toFixed(0)} ms with 1 host`, p50(three.running) / p50(one.running)),
  ]);
} finally {
  // Each ends its standbys (and builders kept ready) as it stops; a kill -9 would leave their QEMUs running.
  for (const p of procs) p.kill('SIGTERM');
  for (let i = 0; i < 300 && procs.some((p) => p.exitCode === null && p.signalCode === null); i++) await sleep(100);
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  await db.end().catch(() => undefined);
  await pgServer.stop();
  await rm(work, { recursive: true, force: true });
}
