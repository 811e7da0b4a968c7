// E2B's SDK (the `e2b` package, unchanged) against agentvm, each figure next to the same through
// agentvm's own API in the same run, taken in turns:
// - Sandbox.create() → the first commands.run('echo') output, against POST /v1/api/vms → running →
//   POST /run (the echo harness), both from a standby; target ≤ 1.2×.
// - commands.run('echo') on a running sandbox against POST /run on a running VM, p50; target ≤ +10 ms.
//   E2B's SDK runs every command as `/bin/bash -l -c …`, so the same line run by the guest agent
//   itself (its exec request, no stream) is the third figure: what the sandbox plane adds over it.
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { Sandbox } from 'e2b';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

// Ten of each (p50s of about 140 ms swung 102–125% with five), the two kinds taking turns going first.
const STARTS = Number(process.env.BENCH_E2B_STARTS ?? 10);
const N = Number(process.env.BENCH_E2B_RUNS ?? 20);
const STANDBYS = 2;
const { server, base, call, untilRunning, close } = await startBenchPlatform('e2bbench', { standbyVms: STANDBYS });
try {
  const driver = server.host.driver!;
  const { key } = await call('POST', '/v1/api/keys', { label: 'bench', scope: 'readwrite', format: 'e2b' });
  const opts = { apiKey: key, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/sandbox`, requestTimeoutMs: 300_000, timeoutMs: 600_000 };
  /** Waits until the host has its standbys again: each start below takes one. */
  const rested = async () => {
    for (let i = 0; i < 600 && driver.standbyCount() < STANDBYS; i++) await new Promise((r) => setTimeout(r, 100));
  };

  const e2bStart: number[] = [];
  const apiStart: number[] = [];
  const viaE2b = async () => {
    await rested();
    const t0 = performance.now();
    const sb = await Sandbox.create('echo', opts);
    const out = await sb.commands.run('echo hello');
    e2bStart.push(performance.now() - t0);
    if (out.stdout.trim() !== 'hello') throw new Error(`e2b echo said ${JSON.stringify(out.stdout)}`);
    await sb.kill();
  };
  const viaApi = async () => {
    await rested();
    const t0 = performance.now();
    const vm = await call('POST', '/v1/api/vms', { harness: 'echo' });
    await untilRunning(vm.vm_id, t0);
    const run = await call('POST', `/v1/api/vms/${vm.vm_id}/run`, { task: 'hello' });
    apiStart.push(performance.now() - t0);
    if (run.exit_code !== 0) throw new Error(`run failed: ${JSON.stringify(run)}`);
    await call('DELETE', `/v1/api/vms/${vm.vm_id}`);
  };
  for (let i = 0; i < STARTS; i++) for (const start of i % 2 ? [viaApi, viaE2b] : [viaE2b, viaApi]) await start();

  // Commands on running machines, in turns.
  await rested();
  const sb = await Sandbox.create('echo', opts);
  const vm = await call('POST', '/v1/api/vms', { harness: 'echo' });
  await untilRunning(vm.vm_id, performance.now());
  const sandboxVm = (await call('GET', '/v1/api/vms')).data.find((v: { vm_id: string }) => v.vm_id !== vm.vm_id).vm_id;
  const e2bRun: number[] = [];
  const apiRun: number[] = [];
  const guestRun: number[] = [];
  for (let i = 0; i < N + 3; i++) {
    let t0 = performance.now();
    await sb.commands.run('echo hello');
    const e = performance.now() - t0;
    t0 = performance.now();
    await call('POST', `/v1/api/vms/${vm.vm_id}/run`, { task: 'hello' });
    const a = performance.now() - t0;
    t0 = performance.now();
    const g = await driver.exec(sandboxVm, { argv: ['/bin/bash', '-l', '-c', 'echo hello'] }, 30_000);
    const gMs = performance.now() - t0;
    if (g.stdout !== 'hello\n') throw new Error(`the guest's echo said ${JSON.stringify(g.stdout)}`);
    if (i >= 3) {
      e2bRun.push(e);
      apiRun.push(a);
      guestRun.push(gMs);
    }
  }
  await sb.kill();
  await call('DELETE', `/v1/api/vms/${vm.vm_id}`);

  const s = [pct(e2bStart, 50), pct(apiStart, 50)];
  const r = [pct(e2bRun, 50), pct(apiRun, 50), pct(guestRun, 50)];
  await report(`E2B's SDK against agentvm's own API (accel ${driver.opts.accel}; ${STARTS} starts, ${N} commands each)`, [
    row('e2b', 'Sandbox.create() → first commands.run echo output, p50 ms', s[0].toFixed(0), `${s[1].toFixed(0)} create → running → POST /run`, s[0] / s[1], '≤ 1.2×', s[0] / s[1] <= 1.2),
    row('e2b', 'commands.run echo on a running sandbox, p50 ms (added)', `${r[0].toFixed(1)} (${r[0] - r[1] >= 0 ? '+' : ''}${(r[0] - r[1]).toFixed(1)})`, `${r[1].toFixed(1)} POST /run`, r[0] / r[1], 'adds ≤ 10 ms', r[0] - r[1] <= 10),
    row('e2b', 'same, against `bash -l -c echo` run by the guest agent itself, p50 ms (added)', `${r[0].toFixed(1)} (${r[0] - r[2] >= 0 ? "+" : ""}${(r[0] - r[2]).toFixed(1)})`, `${r[2].toFixed(1)} guest exec`, r[0] / r[2]),
  ]);
  await server.host.reconciler!.settled();
} finally {
  await close();
}
