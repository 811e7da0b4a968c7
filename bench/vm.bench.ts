// VM start and memory: create → running through the API of a real server, next to a bare QEMU boot
// of the same image with the same command line (spawn → the guest agent's first answer), taken in
// turns in one run; then idle memory (PSS) per VM of both; then 10 concurrent creates.
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm } from 'node:fs/promises';
import { existsSync, openSync, closeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import { startServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { QemuDriver } from '../src/vmm/qemu.ts';
import { connectAgent, agentRequest } from '../src/vmm/channel.ts';
import type { Image } from '../src/image/build.ts';

const N = Number(process.env.BENCH_VMS ?? 10);
const IDLE_MS = Number(process.env.BENCH_IDLE_SECONDS ?? 15) * 1000;
const imageDir = process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

async function pssKib(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN);
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-vmbench-'));
const bareDir = path.join(dataDir, 'bare');
await mkdir(bareDir);
const config = {
  ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }),
  imageDir,
  adminToken: 'avm_admin_bench_0123456789abcdefghijklmnop',
  hostVcpus: 4 * N,
  hostMemoryMib: 2048 * N,
};
const server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
const barePids: number[] = [];
try {
  const image: Image = await server.host.imageReady;
  const driver = server.host.driver!;
  // The bare side: the same command line the platform uses, run by hand.
  const bareDriver = new QemuDriver({ ...driver.opts, vmsDir: bareDir });
  async function bareBoot(i: number): Promise<{ ms: number; pid: number }> {
    const spec = { vmId: `vm_bare${i}`, vcpus: 1, memoryMib: 1024, diskGib: 10, image, netSlot: 1000 + i, hostname: `bare-${i}` };
    await bareDriver.prepareDisks(spec, true);
    const dir = bareDriver.vmDir(spec.vmId);
    const args = await bareDriver.commandLine(spec);
    const t0 = performance.now();
    const log = openSync(path.join(dir, 'qemu.log'), 'a');
    const child = spawn(driver.opts.qemu, args, { detached: true, stdio: ['ignore', log, log] });
    closeSync(log);
    barePids.push(child.pid!);
    while (!existsSync(path.join(dir, 'agent.sock'))) await sleep(5);
    const agent = await connectAgent(path.join(dir, 'agent.sock'));
    for (;;) {
      try {
        await agentRequest(agent, 'hello', undefined, 250);
        break;
      } catch {
        // not up yet
      }
    }
    const ms = performance.now() - t0;
    agent.close();
    return { ms, pid: child.pid! };
  }

  const base = server.url;
  const adminH = { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' };
  const tenant = await (await fetch(`${base}/v1/admin/tenants`, { method: 'POST', headers: adminH, body: JSON.stringify({ email: 'bench@example.com' }) })).json();
  await fetch(`${base}/v1/admin/tenants/${tenant.tenant_id}/card`, { method: 'PUT', headers: adminH, body: JSON.stringify({ brand: 'visa', last4: '4242' }) });
  const h = { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json' };
  async function createAndWait(): Promise<{ ms: number; vmId: string }> {
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo' }) });
    const created = await res.json();
    if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(created)}`);
    const vmId = created.vm_id as string;
    for (;;) {
      const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
      if (vm.status === 'running') return { ms: performance.now() - t0, vmId };
      if (vm.status === 'failed') throw new Error(`${vmId} failed: ${vm.status_reason}`);
      await sleep(10);
    }
  }

  // Sequential, in turns, so that both sides see the same machine.
  const platform: number[] = [];
  const bare: number[] = [];
  const platformVms: string[] = [];
  for (let i = 0; i < N; i++) {
    const b = await bareBoot(i);
    bare.push(b.ms);
    const p = await createAndWait();
    platform.push(p.ms);
    platformVms.push(p.vmId);
    process.stderr.write(`  boot ${i + 1}/${N}: bare ${b.ms.toFixed(0)} ms, platform ${p.ms.toFixed(0)} ms\n`);
  }

  // Idle memory: both sets have been up; let them settle, then read PSS.
  await sleep(IDLE_MS);
  const platformPss: number[] = [];
  for (const vmId of platformVms) platformPss.push(await pssKib(driver.pidOf(vmId)!));
  const barePss: number[] = [];
  for (const pid of barePids) barePss.push(await pssKib(pid));
  for (const pid of barePids) process.kill(pid, 'SIGKILL');
  barePids.length = 0;
  for (const vmId of platformVms) await fetch(`${base}/v1/api/vms/${vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  // 10 concurrent creates.
  const t0 = performance.now();
  const concurrent = await Promise.all(Array.from({ length: 10 }, () => createAndWait()));
  const allMs = performance.now() - t0;
  for (const c of concurrent) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  const mib = (kib: number) => (kib / 1024).toFixed(1);
  const p50 = (xs: number[]) => pct(xs, 50);
  console.log(`\nVM start and memory (${N} VMs each, accel ${driver.opts.accel}, image ${image.id})`);
  console.log('| measure | bare QEMU | platform | platform / bare |');
  console.log('|---|---|---|---|');
  console.log(`| boot → agent ready / create → running, p50 ms | ${p50(bare).toFixed(0)} | ${p50(platform).toFixed(0)} | ${((p50(platform) / p50(bare)) * 100).toFixed(0)}% |`);
  console.log(`| same, p95 ms | ${pct(bare, 95).toFixed(0)} | ${pct(platform, 95).toFixed(0)} | ${((pct(platform, 95) / pct(bare, 95)) * 100).toFixed(0)}% |`);
  console.log(`| idle PSS per VM after ${IDLE_MS / 1000} s, median MiB | ${mib(p50(barePss))} | ${mib(p50(platformPss))} | ${((p50(platformPss) / p50(barePss)) * 100).toFixed(0)}% |`);
  console.log(`| 10 concurrent creates: all running, ms | | ${allMs.toFixed(0)} | |`);
  console.log(`| 10 concurrent creates: each, p50 / p95 ms | | ${p50(concurrent.map((c) => c.ms)).toFixed(0)} / ${pct(concurrent.map((c) => c.ms), 95).toFixed(0)} | |`);
  console.log('Targets: platform adds at most 25% to the start (p50), idle memory at most 110% of bare.');
} finally {
  for (const pid of barePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await server.close({ stopVms: true });
  await rm(dataDir, { recursive: true, force: true });
}
