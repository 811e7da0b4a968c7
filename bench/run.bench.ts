// Echo run round trip: POST /v1/api/vms/{id}/run through a real server, next to the same harness
// command sent straight to the guest agent, taken in turns in one run. Target: the platform adds at
// most 50 ms at p50. Needs QEMU and a built image: AGENTVM_IMAGE_DIR (default /var/cache/agentvm/images).
import { buildInvocation } from '../src/harness/invoke.ts';
import { newId } from '../src/domain/ids.ts';
import type { RunEndEvent } from '../src/wire/protocol.ts';
import { pct, report, row } from './report.ts';
import { startBenchPlatform } from './platform.ts';

const N = Number(process.env.BENCH_RUNS ?? 40);
const { server, base, h, close } = await startBenchPlatform('runbench');
try {
  const { vm_id: vmId } = await (await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo' }) })).json();
  for (;;) {
    const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
    if (vm.status === 'running') break;
    if (vm.status === 'failed') throw new Error(vm.status_reason);
    await new Promise((r) => setTimeout(r, 100));
  }
  const driver = server.host.driver!;
  const inv = buildInvocation('echo', { task: 'bench' });
  /** The same command straight to the guest agent: run_start, then its run_end notification. */
  const guestRun = async (): Promise<RunEndEvent> => {
    const runId = newId('run');
    const ended = new Promise<RunEndEvent>((resolve) => {
      const on = (id: string, msg: Record<string, unknown>) => {
        if (id === vmId && msg.event === 'run_end' && msg.run_id === runId) {
          driver.off('agent-event', on);
          resolve(msg as unknown as RunEndEvent);
        }
      };
      driver.on('agent-event', on);
    });
    await driver.request(vmId, 'run_start', { run_id: runId, argv: inv.argv, env: inv.env, timeout_ms: 60_000, max_output_bytes: 4 << 20 }, 70_000);
    const end = await ended;
    await driver.request(vmId, 'run_ack', { run_id: runId, seq: end.last_seq, done: true }, 10_000);
    return end;
  };
  const direct: number[] = [];
  const viaApi: number[] = [];
  for (let i = 0; i < N + 3; i++) {
    let t = performance.now();
    const d = (await guestRun()).end;
    const directMs = performance.now() - t;
    t = performance.now();
    const res = await fetch(`${base}/v1/api/vms/${vmId}/run`, { method: 'POST', headers: h, body: JSON.stringify({ task: 'bench' }) });
    const body = await res.json();
    const apiMs = performance.now() - t;
    if (res.status !== 200 || body.exit_code !== 0 || d.exit_code !== 0) throw new Error(`run failed: ${JSON.stringify(body)}`);
    if (i >= 3) {
      // the first runs warm the guest's caches
      direct.push(directMs);
      viaApi.push(apiMs);
    }
  }
  const p50d = pct(direct, 50);
  const p50a = pct(viaApi, 50);
  const added = p50a - p50d;
  await report(`Echo run round trip (${N} runs each, accel ${driver.opts.accel})`, [
    row('run', 'echo run via POST /run, p50 ms (added)', `${p50a.toFixed(1)} (+${added.toFixed(1)})`, `${p50d.toFixed(1)} guest agent directly`, p50a / p50d, 'adds ≤ 50 ms', added <= 50),
    row('run', 'same, p95 ms', pct(viaApi, 95).toFixed(1), pct(direct, 95).toFixed(1), pct(viaApi, 95) / pct(direct, 95)),
  ]);
  await fetch(`${base}/v1/api/vms/${vmId}`, { method: 'DELETE', headers: h });
  await server.host.reconciler!.settled();
} finally {
  await close();
}
