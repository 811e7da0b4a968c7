/** A real server in this process for the VM benchmarks, with a tenant whose card is on file. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import type { QemuDriver } from '../src/vmm/qemu.ts';

export interface BenchPlatform {
  server: RunningServer;
  base: string;
  /** Headers of the tenant's readwrite key. */
  h: Record<string, string>;
  /** A JSON call with the tenant's key; throws on an answer of 300 or more. */
  call(method: string, p: string, body?: unknown): Promise<any>;
  /** Milliseconds from `t0` until the VM has `status` (throws if it fails or rests in another). */
  untilStatus(vmId: string, status: string, t0: number): Promise<number>;
  /** Milliseconds from `t0` until the VM is running (throws if it fails or rests in another status). */
  untilRunning(vmId: string, t0: number): Promise<number>;
  close(): Promise<void>;
}

export async function startBenchPlatform(name: string, overrides: Partial<Config> = {}): Promise<BenchPlatform> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `agentvm-${name}-`));
  const config: Config = {
    ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }),
    imageDir: process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images',
    adminToken: 'avm_admin_bench_0123456789abcdefghijklmnop',
    rateLimitPerSecond: 1_000_000,
    rateLimitBurst: 1_000_000,
    snapshots: true,
    // Nor the host's placement capacity (4 vCPUs a core, its memory less 1 GiB, 4× its free disk): the
    // lifecycle benchmark keeps 35 idle VMs on this host to weigh them.
    hostVcpus: 100_000,
    hostMemoryMib: 100_000_000,
    hostDiskGib: 100_000_000,
    ...overrides,
  };
  const server = await startServer(config, createLogger(process.env.BENCH_LOG_LEVEL ?? 'warn', process.stderr));
  const close = async () => {
    await server.close({ stopVms: true });
    // A standby being made as the server closes may still add a file to its directory: retried.
    await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  };
  try {
    await server.host.imageReady;
    await server.host.prewarmed; // the starter shape's snapshot
    // Its standby VMs made (they are made while the host is idle): measurements start on a host at rest.
    const driver = server.host.driver;
    for (let i = 0; driver && i < 600 && driver.standbyCount() < config.standbyVms; i++) await new Promise((r) => setTimeout(r, 100));
    const base = server.url;
    const adminH = { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' };
    const tenant = await (await fetch(`${base}/v1/admin/tenants`, { method: 'POST', headers: adminH, body: JSON.stringify({ email: `${name}@example.com` }) })).json();
    await fetch(`${base}/v1/admin/tenants/${tenant.tenant_id}/card`, { method: 'PUT', headers: adminH, body: JSON.stringify({ brand: 'visa', last4: '4242' }) });
    // A benchmark measures the platform's speed, not a tenant's quota: section 14's defaults (20 running VMs)
    // would refuse the lifecycle benchmark's 20 at once beside the VMs it keeps running.
    const limits = { vms: 10_000, running_vms: 10_000, vcpus: 100_000, memory_mib: 100_000_000, disk_gib: 1_000_000, snapshots: 10_000, images: 1000 };
    const raised = await fetch(`${base}/v1/admin/tenants/${tenant.tenant_id}/limits`, { method: 'PUT', headers: adminH, body: JSON.stringify(limits) });
    if (raised.status !== 200) throw new Error(`raising the bench tenant's limits: ${raised.status} ${await raised.text()}`);
    const h = { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json' };
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${base}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
      const json = await res.json().catch(() => null);
      if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    // A client learns of a status as the CLI's --wait does: GET …/wait answers when the host commits it.
    // (A GET every 10 ms for each VM waited on loads the server it measures: with ten VMs waited on at
    // once, two thirds of its CPU went to answering them.)
    const untilStatus = async (vmId: string, status: string, t0: number) => {
      for (;;) {
        const vm = await call('GET', `/v1/api/vms/${vmId}/wait?status=${status}&timeout_s=60`);
        if (vm.status === status) return performance.now() - t0;
        // Another status it rests in: the wait is over short of the target (a failed suspend runs on).
        if (['failed', 'running', 'stopped', 'suspended'].includes(vm.status)) throw new Error(`${vmId}: ${vm.status} ${vm.status_reason}`);
      }
    };
    const untilRunning = (vmId: string, t0: number) => untilStatus(vmId, 'running', t0);
    return { server, base, h, call, untilStatus, untilRunning, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The bare host↔guest data port, `rounds` times each way: `bytes` written raw to the port and counted by
 * the guest agent (in), and the other way (out), in MiB/s. Run before any stream of the VM's is measured
 * (its raw bytes must not meet a late frame of a stream on the port: interleaved, a transfer hung).
 */
export async function bareChannelRates(driver: QemuDriver, vmId: string, bytes: number, rounds: number): Promise<{ rawIn: number[]; rawOut: number[] }> {
  const mibps = (ms: number) => bytes / 1024 / 1024 / (ms / 1000);
  await driver.dataReady(vmId);
  const ch = driver.dataChannel(vmId);
  const rates = { rawIn: [] as number[], rawOut: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    await driver.request(vmId, 'raw_sink', { bytes }, 10_000);
    let t = performance.now();
    await ch.writeRaw(bytes);
    await driver.request(vmId, 'raw_sink_done', {}, 600_000);
    rates.rawIn.push(mibps(performance.now() - t));
    const counted = ch.expectRaw(bytes);
    t = performance.now();
    await driver.request(vmId, 'raw_source', { bytes }, 600_000);
    await counted;
    rates.rawOut.push(mibps(performance.now() - t));
  }
  return rates;
}
