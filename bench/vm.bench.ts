// Lifecycle and density, through the API of a real server: create → running for VMs that take a
// standby VM and for VMs resumed from the golden snapshot (no standby kept meanwhile), next to cold
// boots of the same platform (its snapshot store asked for cold starts meanwhile), taken in turns in one run; create → first echo output; restart → running;
// suspend → suspended and start → running of a suspended VM next to stop and start; idle memory
// (PSS) per VM of both kinds; then 20 creates at once. Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default
// /var/cache/agentvm/images).
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';
import { pssKib, translatedKib } from './memory.ts';

const COLD = Number(process.env.BENCH_COLD_VMS ?? 5);
const CLONES = Number(process.env.BENCH_CLONE_VMS ?? 10);
const AT_ONCE = Number(process.env.BENCH_AT_ONCE ?? 20);
const IDLE_MS = Number(process.env.BENCH_IDLE_SECONDS ?? 15) * 1000;
const TTI_VMS = Number(process.env.BENCH_TTI_VMS ?? 10);
const SUSPEND_VMS = Number(process.env.BENCH_SUSPEND_VMS ?? 5);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU time a process has used, user and system, in ms (USER_HZ is 100 on Linux). */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const { server, base, h, untilStatus, untilRunning, close } = await startBenchPlatform('vmbench', { hostVcpus: 4 * AT_ONCE, hostMemoryMib: 2048 * AT_ONCE });
try {
  const image = await server.host.imageReady;
  const driver = server.host.driver!;
  const snapshots = server.host.snapshots!;
  async function createAndWait(): Promise<{ ms: number; vmId: string }> {
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo' }) });
    const created = await res.json();
    if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(created)}`);
    return { ms: await untilRunning(created.vm_id, t0), vmId: created.vm_id };
  }

  // Standby VMs (AGENTVM_STANDBY_VMS, 2 by default) are the default start of a new starter VM; a
  // create that finds none resumes the golden snapshot. Both are measured, the first with a standby
  // ready (the host had a moment since the last create), the second with none kept.
  const shape = driver.keptStandbyShape();
  if (!shape) throw new Error('the server keeps no standby VMs (AGENTVM_STANDBY_VMS=0?)');
  // A standby is made only while the host is quiet (src/vmm/standby.ts): beside 25 idle VMs on 2 cores
  // that can take a while. The wait is not measured.
  const standbyReady = async () => {
    for (let i = 0; i < 3000 && driver.standbyCount() < 1; i++) await sleep(100);
    if (driver.standbyCount() < 1) throw new Error('no standby VM was made within 5 minutes');
  };

  // In turns, so that every kind sees the same machine: one cold boot, then its share of clones of
  // the snapshot, then its share of VMs that take a standby.
  const cold: { ms: number; vmId: string }[] = [];
  const clones: { ms: number; vmId: string }[] = [];
  // A resumed clone's QEMU at running: the CPU it used since it started, and the blocks of guest code
  // it translated (TCG): what a burst of creates without standbys must pay for each VM.
  const cloneCpu: number[] = [];
  const cloneBlocks: number[] = [];
  const standbys: { ms: number; vmId: string }[] = [];
  // The same starts with QEMU as the server's own user (AGENTVM_QEMU_SAME_USER=1) in place of a user of
  // its own per VM (src/vmm/isolation.ts), in the same turns: what the isolation costs at start. Only
  // a server running as root isolates; elsewhere both kinds are the same start.
  const sameUserCold: { ms: number; vmId: string }[] = [];
  const sameUserStandbys: { ms: number; vmId: string }[] = [];
  const sameUser = async <T,>(work: () => Promise<T>): Promise<T> => {
    process.env.AGENTVM_QEMU_SAME_USER = '1';
    try {
      return await work();
    } finally {
      delete process.env.AGENTVM_QEMU_SAME_USER;
    }
  };
  for (let i = 0; i < COLD; i++) {
    driver.keepStandby(null);
    snapshots.coldStartsOnly(true);
    cold.push(await createAndWait());
    snapshots.coldStartsOnly(false);
    for (let j = 0; j < CLONES / COLD; j++) {
      const c = await createAndWait();
      if (driver.startedFrom(c.vmId) !== 'snapshot') throw new Error(`${c.vmId} did not resume from the snapshot`);
      clones.push(c);
      cloneCpu.push(await cpuMs(driver.pidOf(c.vmId)!));
      const t = await driver.translated(c.vmId);
      if (t) cloneBlocks.push(t.blocks);
    }
    snapshots.coldStartsOnly(true);
    sameUserCold.push(await sameUser(createAndWait));
    snapshots.coldStartsOnly(false);
    // A standby made as the server's user, taken by a VM as the server's user.
    await sameUser(async () => {
      driver.keepStandby(shape);
      await standbyReady();
      const c = await createAndWait();
      if (driver.startedFrom(c.vmId) !== 'standby') throw new Error(`${c.vmId} did not take a standby`);
      sameUserStandbys.push(c);
      driver.keepStandby(null);
    });
    driver.keepStandby(shape);
    for (let j = 0; j < CLONES / COLD; j++) {
      await standbyReady();
      const c = await createAndWait();
      if (driver.startedFrom(c.vmId) !== 'standby') throw new Error(`${c.vmId} did not take a standby`);
      standbys.push(c);
    }
    process.stderr.write(
      `  round ${i + 1}/${COLD}: cold ${cold.at(-1)!.ms.toFixed(0)} ms, clones ${clones.slice(-CLONES / COLD).map((c) => c.ms.toFixed(0)).join(', ')} ms, standbys ${standbys.slice(-CLONES / COLD).map((c) => c.ms.toFixed(0)).join(', ')} ms\n`,
    );
  }
  // Restart: a fresh root layer, resumed again.
  const restarts: number[] = [];
  for (const c of clones.slice(0, 3)) {
    const t0 = performance.now();
    await fetch(`${base}/v1/api/vms/${c.vmId}/restart`, { method: 'POST', headers: h });
    while (!(await (await fetch(`${base}/v1/api/vms/${c.vmId}`, { headers: h })).json()).status.startsWith('restart')) await sleep(5);
    restarts.push(await untilRunning(c.vmId, t0));
  }

  // Time to interactive: create → the first output of an echo run, as a client does it (create, wait
  // for running, run), on the clones' shape.
  const tti: number[] = [];
  const ttiParts: string[] = [];
  for (let i = 0; i < TTI_VMS; i++) {
    await standbyReady();
    const t0 = performance.now();
    const { vmId, ms: runningMs } = await createAndWait();
    const res = await fetch(`${base}/v1/api/vms/${vmId}/run`, { method: 'POST', headers: h, body: JSON.stringify({ task: 'hi' }) });
    const out = await res.json();
    if (res.status !== 200 || !String(out.stdout).includes('"task":"hi"')) throw new Error(`echo run: ${res.status} ${JSON.stringify(out)}`);
    tti.push(performance.now() - t0);
    ttiParts.push(`${runningMs.toFixed(0)}+${(tti.at(-1)! - runningMs).toFixed(0)}`);
    await fetch(`${base}/v1/api/vms/${vmId}`, { method: 'DELETE', headers: h });
  }
  process.stderr.write(`  time to interactive (create → running + the run): ${ttiParts.join(', ')} ms\n`);

  // Suspend with memory: a starter VM (1 GiB) suspended, then started again, next to stop and start.

  const lifecycleTimed = async (vmId: string, action: string, status: string) => {
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/api/vms/${vmId}/${action}`, { method: 'POST', headers: h });
    if (res.status !== 200) throw new Error(`${action}: ${res.status} ${await res.text()}`);
    return untilStatus(vmId, status, t0);
  };
  const suspends: number[] = [];
  const resumes: number[] = [];
  const stops: number[] = [];
  const starts: number[] = [];
  for (const c of clones.slice(0, SUSPEND_VMS)) {
    suspends.push(await lifecycleTimed(c.vmId, 'suspend', 'suspended'));
    resumes.push(await lifecycleTimed(c.vmId, 'start', 'running'));
    if (driver.startedFrom(c.vmId) !== 'suspended') throw new Error(`${c.vmId} did not resume from its suspend`);
    stops.push(await lifecycleTimed(c.vmId, 'stop', 'stopped'));
    starts.push(await lifecycleTimed(c.vmId, 'start', 'running'));
  }
  process.stderr.write(`  suspend: ${suspends.map((ms) => ms.toFixed(0)).join(', ')} ms; start of a suspended VM: ${resumes.map((ms) => ms.toFixed(0)).join(', ')} ms\n`);

  // Idle memory: both kinds have been up; let them settle, then read PSS.
  await sleep(IDLE_MS);
  const coldPss = await Promise.all(cold.map((c) => pssKib(driver.pidOf(c.vmId)!)));
  const clonePss = await Promise.all(clones.map((c) => pssKib(driver.pidOf(c.vmId)!)));
  const standbyPss = await Promise.all(standbys.map((c) => pssKib(driver.pidOf(c.vmId)!)));
  const standbyTranslated = await Promise.all(standbys.map((c) => translatedKib(driver.pidOf(c.vmId)!)));
  const standbyJit = (await Promise.all(standbys.map((c) => driver.translated(c.vmId)))).filter((t) => t !== null);
  for (const c of [...cold, ...clones, ...standbys, ...sameUserCold, ...sameUserStandbys]) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  // Many at once, on a host with its standbys ready (they take the first ones).
  for (let i = 0; i < 600 && driver.standbyCount() < 2; i++) await sleep(100);
  const t0 = performance.now();
  const atOnce = await Promise.allSettled(Array.from({ length: AT_ONCE }, () => createAndWait()));
  const allMs = performance.now() - t0;
  const ok = atOnce.filter((r): r is PromiseFulfilledResult<{ ms: number; vmId: string }> => r.status === 'fulfilled').map((r) => r.value);
  for (const c of ok) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  // The same burst on a host that keeps as many standbys as the burst (AGENTVM_STANDBY_VMS=20): what
  // an operator who expects bursts of this size configures.
  driver.keepStandby(shape, AT_ONCE);
  const fillT0 = performance.now();
  for (let i = 0; i < 3000 && driver.standbyCount() < AT_ONCE; i++) await sleep(100);
  const fillMs = performance.now() - fillT0;
  const t1 = performance.now();
  const burst = await Promise.allSettled(Array.from({ length: AT_ONCE }, () => createAndWait()));
  const burstMs = performance.now() - t1;
  const burstOk = burst.filter((r): r is PromiseFulfilledResult<{ ms: number; vmId: string }> => r.status === 'fulfilled').map((r) => r.value);
  const burstStandby = burstOk.filter((c) => driver.startedFrom(c.vmId) === 'standby').length;
  driver.keepStandby(shape);
  for (const c of burstOk) await fetch(`${base}/v1/api/vms/${c.vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();

  const kept = driver.opts.standby ?? 0;
  const cores = os.availableParallelism();
  const p = (xs: { ms: number }[] | number[], q: number) => pct(xs.map((x) => (typeof x === 'number' ? x : x.ms)), q);
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
  const r50 = p(standbys, 50) / p(cold, 50);
  const r95 = p(standbys, 95) / p(cold, 95);
  const rPss = pct(standbyPss, 50) / pct(coldPss, 50);
  await report(`Lifecycle and density (${CLONES} VMs that took a standby, ${CLONES} resumed from the snapshot and ${COLD} cold-booted, accel ${driver.opts.accel}, image ${image.id})`, [
    row('lifecycle', 'create → running, a standby ready, p50', `${p(standbys, 50).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot`, r50, '≤ 150 ms and ≤ 3%', p(standbys, 50) <= 150 && r50 <= 0.03),
    row('lifecycle', 'same, p95', `${p(standbys, 95).toFixed(0)} ms`, `${p(cold, 95).toFixed(0)} ms cold boot`, r95, '≤ 20%', r95 <= 0.2),
    row(
      'lifecycle',
      `create → running, a standby ready, p50: QEMU as a user of its own${process.getuid?.() === 0 ? '' : ' (not root: the same start)'}, vs as the server's user`,
      `${p(standbys, 50).toFixed(0)} ms`,
      `${p(sameUserStandbys, 50).toFixed(0)} ms as the server's user`,
      p(standbys, 50) / p(sameUserStandbys, 50),
    ),
    row('lifecycle', "cold boot → running, p50: QEMU as a user of its own, vs as the server's user", `${p(cold, 50).toFixed(0)} ms`, `${p(sameUserCold, 50).toFixed(0)} ms as the server's user`, p(cold, 50) / p(sameUserCold, 50)),
    row('lifecycle', 'create → running from the snapshot (no standby), p50 / p95', `${p(clones, 50).toFixed(0)} / ${p(clones, 95).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot`, p(clones, 50) / p(cold, 50)),
    ...(cloneBlocks.length
      ? [
          row(
            'lifecycle',
            "same: its QEMU's CPU from its start to running, p50 (blocks of guest code it translated, p50)",
            `${pct(cloneCpu, 50).toFixed(0)} ms (${pct(cloneBlocks, 50).toFixed(0)})`,
            `${p(clones, 50).toFixed(0)} ms create → running`,
            pct(cloneCpu, 50) / p(clones, 50),
          ),
        ]
      : []),
    row('lifecycle', `create → first echo output (time to interactive), p50 / p99 (${TTI_VMS} VMs)`, `${p(tti, 50).toFixed(0)} / ${p(tti, 99).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot to running`, p(tti, 50) / p(cold, 50), '≤ 300 / ≤ 600 ms', p(tti, 50) <= 300 && p(tti, 99) <= 600),
    row('lifecycle', 'restart → running, p50 (3 VMs)', `${p(restarts, 50).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms cold boot`, p(restarts, 50) / p(cold, 50)),
    row('suspend', `suspend of a starter VM (1 GiB) → suspended, p50 (${SUSPEND_VMS} VMs)`, `${p(suspends, 50).toFixed(0)} ms`, `${p(stops, 50).toFixed(0)} ms stop → stopped`, p(suspends, 50) / p(stops, 50), '≤ 2 s', p(suspends, 50) <= 2000),
    row('suspend', `start of a suspended VM → running, p50 (${SUSPEND_VMS} VMs)`, `${p(resumes, 50).toFixed(0)} ms`, `${p(starts, 50).toFixed(0)} ms start of a stopped VM`, p(resumes, 50) / p(starts, 50), '≤ 500 ms', p(resumes, 50) <= 500),
    row('density', `idle PSS per VM that took a standby after ${IDLE_MS / 1000} s, median`, mib(pct(standbyPss, 50)), `${mib(pct(coldPss, 50))} cold-booted`, rPss, '≤ 40 MiB', pct(standbyPss, 50) <= 40 * 1024),
    row('density', 'same, resumed from the snapshot', mib(pct(clonePss, 50)), `${mib(pct(coldPss, 50))} cold-booted`, pct(clonePss, 50) / pct(coldPss, 50)),
    row(
      'density',
      'idle PSS per VM that took a standby, less its translated code (TCG only), median',
      mib(pct(standbyPss.map((k, i) => k - standbyTranslated[i]), 50)),
      `${mib(pct(standbyTranslated, 50))} of translated code`,
      pct(standbyPss.map((k, i) => k - standbyTranslated[i]), 50) / pct(standbyPss, 50),
    ),
    ...(standbyJit.length
      ? [
          row(
            'density',
            "translated code of an idle VM that took a standby, by its QEMU's count (info jit), median",
            `${mib(pct(standbyJit.map((t) => t.codeBytes / 1024), 50))} in ${pct(standbyJit.map((t) => t.blocks), 50).toFixed(0)} blocks`,
            '40 MiB, the PSS target',
            pct(standbyJit.map((t) => t.codeBytes / 1024), 50) / (40 * 1024),
          ),
        ]
      : []),
    row('density', `${AT_ONCE} creates at once: all running`, `${ok.length}/${AT_ONCE} in ${(allMs / 1000).toFixed(1)} s`, `${p(cold, 50).toFixed(0)} ms one cold boot`, ok.length === AT_ONCE ? allMs / p(cold, 50) : null, `all ${AT_ONCE}, ≤ 1.5 s`, ok.length === AT_ONCE && allMs <= 1500),
    ...(cloneBlocks.length
      ? [
          row(
            'density',
            `${AT_ONCE} at once with ${kept} kept: the CPU the ${AT_ONCE - kept} resumed clones' QEMUs need to reach running (p50 each), over ${cores} cores`,
            `${(((AT_ONCE - kept) * pct(cloneCpu, 50)) / cores / 1000).toFixed(1)} s`,
            `${(allMs / 1000).toFixed(1)} s measured`,
            ((AT_ONCE - kept) * pct(cloneCpu, 50)) / cores / allMs,
          ),
        ]
      : []),
    row('density', `${AT_ONCE} at once: create → running p50 / p95`, `${p(ok, 50).toFixed(0)} / ${p(ok, 95).toFixed(0)} ms`, `${p(cold, 50).toFixed(0)} ms one cold boot`, p(ok, 50) / p(cold, 50), 'p95 ≤ 1.2 s', p(ok, 95) <= 1200),
    row(
      'density',
      `${AT_ONCE} at once, ${AT_ONCE} standbys kept (made in ${(fillMs / 1000).toFixed(0)} s; ${burstStandby} taken): all running, p50 / p95`,
      `${burstOk.length}/${AT_ONCE} in ${(burstMs / 1000).toFixed(1)} s, ${p(burstOk, 50).toFixed(0)} / ${p(burstOk, 95).toFixed(0)} ms`,
      `${(allMs / 1000).toFixed(1)} s with ${kept} kept`,
      burstOk.length === AT_ONCE ? burstMs / allMs : null,
      `all ${AT_ONCE}, ≤ 1.5 s; p95 ≤ 1.2 s`,
      burstOk.length === AT_ONCE && burstMs <= 1500 && p(burstOk, 95) <= 1200,
    ),
  ]);
} finally {
  await close();
}
