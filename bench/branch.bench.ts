// Branching a running VM (decisions section 18), through the API of a real server, each figure next
// to its baseline from the same run, in turns:
// - the VM's pause (paused_ms, a starter VM: 1 GiB) against suspend → suspended of the same VM;
// - branch → its VM running against start → running of a suspended VM;
// - a branch of 10 → all running, against 10 × one VM's QEMU CPU time to running over 2 cores
//   (CPU-bound under TCG);
// - the host disk 10 VMs of a branch add, against 10 × the VM's memory.
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { readdir, readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

const N = Number(process.env.BENCH_BRANCHES ?? 4);
const WIDE = Number(process.env.BENCH_BRANCH_WIDE ?? 10);
// Twelve starter VMs at once are more vCPUs than a 2-core host offers by default (4 a core): the host
// here offers what the branch of WIDE needs, since this measures the branch, not placement.
const { server, call, untilStatus, untilRunning, close } = await startBenchPlatform('branchbench', { hostVcpus: 64 });
/** Clock ticks a second in /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICK = 100;
try {
  const driver = server.host.driver!;
  const adminH = { authorization: 'Bearer avm_admin_bench_0123456789abcdefghijklmnop', 'content-type': 'application/json' };
  const tenantId = (await call('GET', '/v1/api/whoami')).tenant_id;
  await fetch(`${server.url}/v1/admin/tenants/${tenantId}/credits`, { method: 'POST', headers: adminH, body: JSON.stringify({ amount_cents: 100_000 }) });
  const newVm = async () => {
    const vm = await call('POST', '/v1/api/vms', { tier: 'spot', harness: 'echo' });
    await untilRunning(vm.vm_id, performance.now());
    // Some memory of its own, as a VM at work has.
    const r = await driver.exec(vm.vm_id, { argv: ['sh', '-c', 'mkdir -p /mnt/m && mount -t tmpfs m /mnt/m && head -c 40000000 /dev/urandom > /mnt/m/fill'] }, 120_000);
    if (r.exit_code !== 0) throw new Error(r.stderr);
    return vm.vm_id as string;
  };
  const paused: number[] = [];
  const suspended: number[] = [];
  const firstRunning: number[] = [];
  const resumed: number[] = [];
  const parent = await newVm();
  const other = await newVm();
  for (let i = 0; i < N; i++) {
    let t0 = performance.now();
    const b = await call('POST', `/v1/api/vms/${parent}/branch`, { tier: 'spot' });
    paused.push(b.paused_ms);
    firstRunning.push(await untilRunning(b.vm_ids[0], t0));
    await call('DELETE', `/v1/api/vms/${b.vm_ids[0]}`);
    t0 = performance.now();
    await call('POST', `/v1/api/vms/${other}/suspend`);
    suspended.push(await untilStatus(other, 'suspended', t0));
    t0 = performance.now();
    await call('POST', `/v1/api/vms/${other}/start`);
    resumed.push(await untilRunning(other, t0));
  }
  // A branch of WIDE.
  const cpuOf = async (vmId: string) => {
    const pid = await driver.ownPid(vmId);
    if (!pid) return 0;
    const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) / TICK) * 1000;
  };
  let t0 = performance.now();
  const wide = await call('POST', `/v1/api/vms/${parent}/branch`, { tier: 'spot', count: WIDE });
  await Promise.all(wide.vm_ids.map((id: string) => untilRunning(id, t0)));
  const wideMs = performance.now() - t0;
  const cpu = await Promise.all(wide.vm_ids.map(cpuOf));
  const oneCpu = pct(cpu, 50);
  // The disk they add: files of theirs that no other directory holds (their own top layers and logs).
  const seen = new Set<number>();
  const parentInodes = new Set<number>();
  for (const name of await readdir(driver.vmDir(parent))) parentInodes.add((await stat(path.join(driver.vmDir(parent), name))).ino);
  let added = 0;
  for (const id of wide.vm_ids) {
    const dir = driver.vmDir(id);
    for (const name of await readdir(dir)) {
      const st = await stat(path.join(dir, name)).catch(() => null);
      if (!st || !st.isFile() || seen.has(st.ino) || parentInodes.has(st.ino)) continue;
      seen.add(st.ino);
      // A link shared by the VMs (the branch's saved memory, its layers): counted once.
      added += st.blocks * 512;
    }
  }
  const memBytes = 1024 * 1024 * 1024;
  await server.host.reconciler!.settled();
  const p = (xs: number[]) => pct(xs, 50);
  const cores = Math.min(2, os.cpus().length);
  const wideBase = (WIDE * oneCpu) / cores;
  await report(`Branching (${N} of each, in turns; a branch of ${WIDE})`, [
    row('branch', 'VM paused (paused_ms), starter VM with 40 MB of its own, p50', `${p(paused).toFixed(0)} ms`, `${p(suspended).toFixed(0)} ms suspend → suspended`, p(paused) / p(suspended), '≤ 100%', p(paused) <= p(suspended)),
    row('branch', 'branch → its VM running, p50', `${p(firstRunning).toFixed(0)} ms`, `${p(resumed).toFixed(0)} ms start of a suspended VM`, p(firstRunning) / p(resumed), '≤ 150%', p(firstRunning) <= 1.5 * p(resumed)),
    row('branch', `branch of ${WIDE} → all running`, `${wideMs.toFixed(0)} ms`, `${wideBase.toFixed(0)} ms = ${WIDE} × ${oneCpu.toFixed(0)} ms QEMU CPU / ${cores} cores`, wideMs / wideBase, '≤ 130%', wideMs <= 1.3 * wideBase),
    row('branch', `host disk ${WIDE} VMs of a branch add`, `${(added / 2 ** 20).toFixed(1)} MiB`, `${WIDE} × 1024 MiB memory`, added / (WIDE * memBytes), '≤ 15%', added <= 0.15 * WIDE * memBytes),
  ]);
} finally {
  await close();
}
