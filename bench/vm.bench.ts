// Lifecycle and density, through the API of a real server: create → running for VMs resumed from
// the golden snapshot next to cold boots of the same platform (its snapshot store asked for cold
// starts meanwhile), taken in turns in one run; restart → running; idle memory (PSS) per VM of both kinds;
// then 20 creates at once. Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default
// /var/cache/agentvm/images).
import { readFile } from 'node:fs/promises';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

const COLD = Number(process.env.BENCH_COLD_VMS ?? 5);
const CLONES = Number(process.env.BENCH_CLONE_VMS ?? 10);
const AT_ONCE = Number(process.env.BENCH_AT_ONCE ?? 20);
const IDLE_MS = Number(process.env.BENCH_IDLE_SECONDS ?? 15) * 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pssKib(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN);
}

const { server, base, h, close } = await startBenchPlatform('vmbench', { hostVcpus: 4 * AT_ONCE, hostMemoryMib: 2048 * AT_ONCE });
try {
  const image = await server.host.imageReady;
  const driver = server.host.driver!;
  const snapshots = server.host.snapshots!;
  const untilRunning = async (vmId: string, t0: number) => {
    for (;;) {
      const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
      if (vm.status === 'running') return performance.now() - t0;
      if (vm.status === 'failed') throw new Error(`${vmId} failed: ${vm.status_reason}`);
      await sleep(10);
    }
  };
  async function createAndWait(): Promise<{ ms: number; vmId: string }> {
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo' }) });
    const created = await res.json();
    if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(created)}`);
    return { ms: await untilRunning(created.vm_id, t0), vmId: created.vm_id };
  }

  // In turns, so that both kinds see the same machine: one cold boot, then its share of clones.
  const cold: { ms: number; vmId: string }[] = [];
  const clones: { ms: number; vmId: string }[] = [];
  for (let i = 0; i < COLD; i++) {
    snapshots.coldStartsOnly(true);
    cold.push(await createAndWait());
    snapshots.coldStartsOnly(false);
    for (let j = 0; j < CLONES / COLD; j++) {
      const c = await createAndWait();
      if (driver.startedFrom(c.vmId) !== 'snapshot') throw new Error(`${c.vmId} did not resume from the snapshot`);
      clones.push(c);
    }
    process.stderr.write(`  round ${i + 1}/${COLD}: cold ${cold.at(-1)!.ms.toFixed(0)} ms, clones ${clones.slice(-CLONES / COLD).map((c) => c.ms.toFixed(0)).join(', ')} ms\n`);
  }
  // Restart: a fresh root layer, resumed again.
  const restarts: number[] = [];
  for (const c of clones.slice(0, 3)) {
    const t0 = performance.now();
    await fetch(`${base}/v1/api/vms/${c.vmId}/restart`, { method: 'POST', headers: h });
    while (!(await (await fetch(`${base}/v1/api/vms/${c.vmId}`, { headers: h })).json()).status.startsWith('restart')) await sleep(5);
    restarts.push(await untilRunning(c.vmId, t0));
  }

  // Idle memory: both kinds have been up; let them settle, then read PSS.
  await sleep(IDLE_MS);
  const coldPss = await Promise.all(cold.map((c) => pssKib(driver.pidOf(c.vmId)!)));
  const clonePss = await Promise.all(clones.map((c) => pssKib(driver.pidOf(c.vmId)!)));
  for (const c of [...cold, ...clones]) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  // Many at once.
  const t0 = performance.now();
  const atOnce = await Promise.allSettled(Array.from({ length: AT_ONCE }, () => createAndWait()));
  const allMs = performance.now() - t0;
  const ok = atOnce.filter((r): r is PromiseFulfilledResult<{ ms: number; vmId: string }> => r.status === 'fulfilled').map((r) => r.value);
  for (const c of ok) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  const p = (xs: { ms: number }[] | number[], q: number) => pct(xs.map((x) => (typeof x === 'number' ? x : x.ms)), q);
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
  const r50 = p(clones, 50) / p(cold, 50);
  const r95 = p(clones, 95) / p(cold, 95);
  const rPss = pct(clonePss, 50) / pct(coldPss, 50);
  await report(`Lifecycle and density (${CLONES} resumed and ${COLD} cold-booted VMs, accel ${driver.opts.accel}, image ${image.id})`, [
    row('lifecycle', 'create → running from the snapshot, p50', `${p(clones, 50).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot`, r50, '≤ 10%', r50 <= 0.1),
    row('lifecycle', 'same, p95', `${p(clones, 95).toFixed(0)} ms`, `${p(cold, 95).toFixed(0)} ms cold boot`, r95, '≤ 20%', r95 <= 0.2),
    row('lifecycle', 'restart → running, p50 (3 VMs)', `${p(restarts, 50).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot`, p(restarts, 50) / p(cold, 50)),
    row('density', `idle PSS per VM after ${IDLE_MS / 1000} s, median`, mib(pct(clonePss, 50)), `${mib(pct(coldPss, 50))} cold-booted`, rPss, '≤ 50%', rPss <= 0.5),
    row('density', `${AT_ONCE} creates at once: reached running`, `${ok.length}/${AT_ONCE} in ${(allMs / 1000).toFixed(1)} s`, '', null, `all ${AT_ONCE}`, ok.length === AT_ONCE),
    row('density', `${AT_ONCE} at once: create → running p50 / p95`, `${p(ok, 50).toFixed(0)} / ${p(ok, 95).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms one cold boot`, p(ok, 50) / p(cold, 50)),
  ]);
} finally {
  await close();
}
