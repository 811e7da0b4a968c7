// Runs as records, live: from an asynchronous POST /run of a ticker run to its first stdout event at
// a watcher of its event stream, next to the time the guest agent itself reports for that first line
// in the same run (target: the platform adds ≤ 20 ms at p50); and 50 watchers of one run: how long
// after the first of them each gets a line (target p95 ≤ 50 ms).
// Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { readRunStream } from '../src/client/runEvents.ts';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

const N = Number(process.env.BENCH_RUNS ?? 30);
const WATCHERS = 50;
const LINES = 10;
const { server, base, h, close } = await startBenchPlatform('runsbench');
const key = h.authorization.slice('Bearer '.length);
try {
  const { vm_id: vmId } = await (await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'ticker' }) })).json();
  for (;;) {
    const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
    if (vm.status === 'running') break;
    if (vm.status === 'failed') throw new Error(vm.status_reason);
    await new Promise((r) => setTimeout(r, 100));
  }
  const start = async (task: string) => {
    const res = await fetch(`${base}/v1/api/vms/${vmId}/run`, { method: 'POST', headers: { ...h, prefer: 'respond-async' }, body: JSON.stringify({ task }) });
    if (res.status !== 202) throw new Error(`run: ${res.status} ${await res.text()}`);
    return (await res.json()).run_id as string;
  };

  // First line: the whole path (queue, start in the guest, output back, stored, streamed) vs the guest's own figure.
  const toFirst: number[] = [];
  const guestFirst: number[] = [];
  for (let i = 0; i < N + 3; i++) {
    const t = performance.now();
    const runId = await start('first');
    let first = 0;
    const end = await readRunStream({ baseUrl: base, key, vmId, runId, after: 0, onOutput: () => (first ||= performance.now()) }, () => undefined);
    if (!end || end.status !== 'succeeded') throw new Error(`the run did not succeed: ${JSON.stringify(end)}`);
    const [rec] = await server.services.db.query<{ first_output_ms: number }>('SELECT first_output_ms FROM runs WHERE run_id = $1', [runId]);
    if (i >= 3) {
      toFirst.push(first - t);
      guestFirst.push(rec.first_output_ms);
    }
  }

  // Fan-out: 50 watchers of one run, each line's arrival at each of them after the first of them.
  const task = Array.from({ length: LINES }, (_, i) => `tick ${i + 1}`).join('\n');
  const runId = await start(task);
  const arrivals: number[][] = Array.from({ length: LINES }, () => []);
  await Promise.all(
    Array.from({ length: WATCHERS }, () =>
      readRunStream({ baseUrl: base, key, vmId, runId, after: 0, onOutput: (o) => arrivals[o.id - 1].push(performance.now()) }, () => undefined),
    ),
  );
  const lags: number[] = [];
  for (const times of arrivals) {
    if (times.length !== WATCHERS) throw new Error(`a line reached ${times.length} of ${WATCHERS} watchers`);
    const firstAt = Math.min(...times);
    for (const t of times) lags.push(t - firstAt);
  }

  const p50 = pct(toFirst, 50);
  const g50 = pct(guestFirst, 50);
  // What the platform adds to each run (its whole path less the guest's own time for that same run),
  // p50: the guest's own time varies from run to run by more than the target, so the difference of
  // the two p50s (shown too) mixes that spread into the figure.
  const added = pct(toFirst.map((t, i) => t - guestFirst[i]), 50);
  const apart = p50 - g50;
  const lag95 = pct(lags, 95);
  await report(`Runs as records (${N} ticker runs; ${WATCHERS} watchers × ${LINES} lines; accel ${server.host.driver!.opts.accel})`, [
    row(
      'runs',
      "async POST /run → first stdout event at a watcher, p50 ms (added to each run, p50; the p50s' difference)",
      `${p50.toFixed(1)} (+${added.toFixed(1)}; +${apart.toFixed(1)})`,
      `${g50.toFixed(1)} guest's own first line`,
      p50 / g50,
      'adds ≤ 20 ms',
      added <= 20,
    ),
    row('runs', 'same, p95 ms', pct(toFirst, 95).toFixed(1), pct(guestFirst, 95).toFixed(1), pct(toFirst, 95) / pct(guestFirst, 95)),
    row('runs', `${WATCHERS} watchers: a line at each after the first of them, p95 ms`, lag95.toFixed(1), `max ${Math.max(...lags).toFixed(1)}`, null, '≤ 50 ms', lag95 <= 50),
  ]);
  await fetch(`${base}/v1/api/vms/${vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();
} finally {
  await close();
}
