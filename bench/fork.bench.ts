// Copy-on-write forks: a template whose persist disk holds 1 GiB of data next to an empty one, forked
// in turns through the API of a real server: fork → running, and the disk a fork adds on the host.
// Targets: the 1 GiB fork within 2x of the empty one; a fork adds under 1 MiB of disk.
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

const N = Number(process.env.BENCH_FORKS ?? 4);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const { server, call, untilRunning, close } = await startBenchPlatform('forkbench');
try {
  const driver = server.host.driver!;
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
  await close();
}
