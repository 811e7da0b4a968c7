/**
 * The server of a real-VM test file: in this process, on a data dir of its own seeded with the run's
 * golden snapshot (helpers.ts seedSnapshots), the guest image of AGENTVM_TEST_IMAGE_DIR, an admin
 * token, and a tenant with a card on file (and credits, when asked). Its errors reach stderr; the
 * rest of its log is dropped. `close` stops its VMs and removes the data dir.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, type Config } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import assert from 'node:assert/strict';
import { apiClient, killQemusUnder, seedSnapshots, until, type ApiCall } from './helpers.ts';

export const TEST_ADMIN_TOKEN = 'avm_admin_test_token_0123456789abcdefghijkl';

export interface VmTestServer {
  dataDir: string;
  config: Config;
  server: RunningServer;
  admin: ApiCall;
  tenant: { tenant_id: string; api_key: string };
  /** The tenant's API, with its key. */
  api: ApiCall;
  /** A shell line as root in a VM; it must exit 0. Answers its stdout, trimmed. */
  sh(vmId: string, script: string, timeoutMs?: number): Promise<string>;
  /** The VM once its status is `status`; a VM that failed (when not waited for) ends the wait at once. */
  untilStatus(vmId: string, status: string, ms?: number): Promise<any>;
  close(): Promise<void>;
}

export async function startVmTestServer(
  name: string,
  opts: {
    email?: string;
    /** Prepaid credits for the tenant, in cents (tier VMs). */
    credits?: number;
    config?: Partial<Config>;
    /** Waits for the standby pool's first VMs too. */
    prewarmed?: boolean;
    /** Seeds the run's golden snapshot (default); false for a server that boots cold anyway. */
    seed?: boolean;
  } = {},
): Promise<VmTestServer> {
  const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
  if (!imageDir) throw new Error('AGENTVM_TEST_IMAGE_DIR is not set');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `agentvm-${name}-`));
  process.env.AGENTVM_ADMIN_TOKEN = TEST_ADMIN_TOKEN;
  const config: Config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir, ...opts.config };
  delete process.env.AGENTVM_ADMIN_TOKEN;
  if (opts.seed !== false) await seedSnapshots(dataDir);
  const errorsOnly = new Writable({
    write: (c, _e, cb) => {
      if (/"level":(50|60)/.test(c.toString())) process.stderr.write(c);
      cb();
    },
  });
  const server = await startServer(config, createLogger('info', errorsOnly));
  const close = async () => {
    await server.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await server.host.imageReady;
    const admin = apiClient(server.url, TEST_ADMIN_TOKEN);
    const tenant = (await admin('POST', '/v1/admin/tenants', { email: opts.email ?? `${name}@example.com` })).body as { tenant_id: string; api_key: string };
    await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    if (opts.credits) await admin('POST', `/v1/admin/tenants/${tenant.tenant_id}/credits`, { amount_cents: opts.credits });
    if (opts.prewarmed) await server.host.prewarmed;
    const api = apiClient(server.url, tenant.api_key);
    const sh = async (vmId: string, script: string, timeoutMs = 30_000) => {
      const r = await server.host.driver!.exec(vmId, { argv: ['sh', '-c', script] }, timeoutMs);
      assert.equal(r.exit_code, 0, `${vmId}: ${script}: ${r.stderr}`);
      return r.stdout.trim();
    };
    const untilStatus = (vmId: string, status: string, ms = 5 * 60_000) =>
      until(`${vmId} ${status}`, async () => {
        const v = (await api('GET', `/v1/api/vms/${vmId}`)).body;
        if (v.status === 'failed' && status !== 'failed') throw new Error(`failed: ${v.status_reason}`);
        return v.status === status ? v : undefined;
      }, ms);
    return { dataDir, config, server, admin, tenant, api, sh, untilStatus, close };
  } catch (err) {
    await close();
    throw err;
  }
}
