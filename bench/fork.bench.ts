// Copy-on-write forks: a template whose persist disk holds 1 GiB of data next to an empty one, forked
// in turns through the API of a real server: fork → running, and the disk a fork adds on the host.
// Targets: the 1 GiB fork within 2x of the empty one; a fork adds under 1 MiB of disk.
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { pct, report, row } from './report.ts';

const N = Number(process.env.BENCH_FORKS ?? 4);
const imageDir = process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-forkbench-'));
const config = {
  ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }),
  imageDir,
  adminToken: 'avm_admin_bench_0123456789abcdefghijklmnop',
  rateLimitPerSecond: 1_000_000,
  rateLimitBurst: 1_000_000,
  snapshots: true,
};
const server = await startServer(config, createLogger('warn', process.stderr));
try {
  await server.host.imageReady;
  await server.host.prewarmed;
  const driver = server.host.driver!;
  const base = server.url;
  const adminH = { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' };
  const tenant = await (await fetch(`${base}/v1/admin/tenants`, { method: 'POST', headers: adminH, body: JSON.stringify({ email: 'forkbench@example.com' }) })).json();
  await fetch(`${base}/v1/admin/tenants/${tenant.tenant_id}/card`, { method: 'PUT', headers: adminH, body: JSON.stringify({ brand: 'visa', last4: '4242' }) });
  const h = { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json' };
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = await res.json().catch(() => null);
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const untilRunning = async (vmId: string, t0: number) => {
    for (;;) {
      const vm = await call('GET', `/v1/api/vms/${vmId}`);
      if (vm.status === 'running') return performance.now() - t0;
      if (vm.status === 'failed') throw new Error(`${vmId} failed: ${vm.status_reason}`);
      await sleep(10);
    }
  };
  async function template(name: string, fill: boolean): Promise<string> {
    const vm = await call('POST', '/v1/api/vms', { harness: 'echo' });
    await untilRunning(vm.vm_id, performance.now());
    if (fill) {
      const r = await driver.exec(vm.vm_id, { argv: ['sh', '-c', 'yes agentvm-fork-bench | head -c 1073741824 > /persist/data && sync && du -sm /persist/data'] }, 15 * 60_000);
      if (r.exit_code !== 0) throw new Error(`filling the disk failed: ${r.stderr}`);
    }
    const tpl = await call('POST', `/v1/api/vms/${vm.vm_id}/capture`, { visibility: 'private', name });
    for (;;) {
      const t = await call('GET', `/v1/api/templates/${tpl.template_id}`);
      if (t.status === 'ready') break;
      if (t.status === 'failed') throw new Error(`capture failed`);
      await sleep(200);
    }
    await call('DELETE', `/v1/api/vms/${vm.vm_id}`);
    return tpl.template_id;
  }
  const full = await template('one gigabyte', true);
  const empty = await template('empty', false);
  const forks: Record<'full' | 'empty', { ms: number; bytes: number }[]> = { full: [], empty: [] };
  for (let i = 0; i < N; i++) {
    for (const [kind, id] of [['full', full], ['empty', empty]] as const) {
      const t0 = performance.now();
      const vm = await call('POST', `/v1/api/templates/${id}/fork`, {});
      const ms = await untilRunning(vm.vm_id, t0);
      forks[kind].push({ ms, bytes: await driver.diskUsage(vm.vm_id) });
      await call('DELETE', `/v1/api/vms/${vm.vm_id}`);
    }
  }
  await server.host.reconciler!.settled();
  const p50 = (k: 'full' | 'empty') => pct(forks[k].map((f) => f.ms), 50);
  const maxBytes = Math.max(...forks.full.map((f) => f.bytes), ...forks.empty.map((f) => f.bytes));
  const ratio = p50('full') / p50('empty');
  await report(`Forks (${N} of each, in turns)`, [
    row('fork', 'fork of a 1 GiB template → running, p50', `${p50('full').toFixed(0)} ms`, `${p50('empty').toFixed(0)} ms empty template`, ratio, '≤ 200%', ratio <= 2),
    row('fork', 'disk a fork adds on the host, largest', `${(maxBytes / 1024).toFixed(0)} KiB`, '1 GiB template', maxBytes / 2 ** 30, '< 1 MiB', maxBytes < 2 ** 20),
  ]);
} finally {
  await server.close({ stopVms: true });
  await rm(dataDir, { recursive: true, force: true });
}
