/**
 * VM metrics on a real microVM: its host samples it while it runs (CPU from QEMU, memory and the
 * persist disk from the guest agent), a file written to the persist disk shows in its use, samples
 * keep coming, and a stopped VM answers its last sample.
 * Needs a built guest image: AGENTVM_TEST_IMAGE_DIR (npm run test:all sets it).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { Writable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { killQemusUnder, seedSnapshots, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const ADMIN = 'avm_admin_test_token_0123456789abcdefghijkl';

describe('metrics of a real microVM', { skip }, () => {
  let dataDir: string;
  let server: RunningServer;
  let key: string;

  const api = async (method: string, p: string, body?: unknown, raw?: Uint8Array<ArrayBuffer>) => {
    const res = await fetch(`${server.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${p.startsWith('/v1/admin') ? ADMIN : key}`, 'content-type': raw ? 'application/octet-stream' : 'application/json' },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-metrics-'));
    process.env.AGENTVM_ADMIN_TOKEN = ADMIN;
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir!, metricsIntervalMs: 1000 };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    await seedSnapshots(dataDir);
    server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
    await server.host.imageReady;
    const tenant = await api('POST', '/v1/admin/tenants', { email: 'metrics@example.com' });
    key = tenant.body.api_key;
    await api('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('sampled while it runs; a file on the persist disk shows; stopped, it answers its last sample', { timeout: 5 * 60_000 }, async () => {
    const created = await api('POST', '/v1/api/vms', { harness: 'echo' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const vmId = created.body.vm_id;
    await until('running', async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(vm.status_reason);
      return vm.status === 'running';
    });
    const url = `/v1/api/vms/${vmId}/metrics`;
    const first = await until('a sample', async () => {
      const r = await api('GET', url);
      return r.status === 200 && r.body.disk_used_bytes > 0 && r.body;
    });
    assert.ok(first.cpu_percent >= 0 && first.cpu_percent <= 100, `cpu ${first.cpu_percent}`);
    assert.equal(first.memory_mib, 1024);
    assert.ok(first.memory_used_mib > 10 && first.memory_used_mib < 1024, `memory ${first.memory_used_mib} MiB`);
    assert.equal(first.disk_bytes, 10 * 2 ** 30);
    assert.ok(first.disk_used_bytes < first.disk_bytes);

    const put = await api('PUT', `${url.replace('/metrics', '/files')}?path=big.bin`, undefined, new Uint8Array(8 * 2 ** 20).fill(7));
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const grown = await until('the file in the disk use', async () => {
      const r = (await api('GET', url)).body;
      return r.disk_used_bytes >= first.disk_used_bytes + 7 * 2 ** 20 && r;
    }, 30_000);
    assert.ok(Date.parse(grown.sampled_at) > Date.parse(first.sampled_at), 'samples keep coming');

    assert.equal((await api('POST', `/v1/api/vms/${vmId}/stop`)).status, 200);
    await until('stopped', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'stopped');
    const last = (await api('GET', url)).body;
    await new Promise((r) => setTimeout(r, 2500));
    const later = await api('GET', url);
    assert.equal(later.status, 200);
    assert.equal(later.body.sampled_at, last.sampled_at, 'a stopped VM is not sampled; its last sample stays');
  });
});
