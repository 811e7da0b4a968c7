// Shells and files: how fast a file goes into and out of a VM through the API, and how long a
// keystroke takes to come back from a shell. In the same run, as baselines: the bare host↔guest data
// port (the same bytes written raw to the port and counted by the guest agent, and the other way), and
// a ping through the guest agent. Targets (issue 17): upload and download of 100 MiB keep ≥ 50% of
// the bare channel's MiB/s; the keystroke echo p50 is ≤ 2× the ping p50.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import { pct, report, row } from './report.ts';
import { bareChannelRates, startBenchPlatform } from './platform.ts';

const MIB = Number(process.env.BENCH_FILE_MIB ?? 100);
const KEYS = Number(process.env.BENCH_KEYSTROKES ?? 50);
const ROUNDS = Number(process.env.BENCH_FILE_ROUNDS ?? 3);
const BYTES = MIB * 1024 * 1024;
const mibps = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);
const fmt = (x: number) => `${x.toFixed(1)} MiB/s`;

const { server, base, h, close } = await startBenchPlatform('filesbench');
try {
  const created = await (await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo', egress: { mode: 'none', allow: [] } }) })).json();
  const vmId = created.vm_id as string;
  for (;;) {
    const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
    if (vm.status === 'running') break;
    if (vm.status === 'failed') throw new Error(vm.status_reason);
    await new Promise((r) => setTimeout(r, 100));
  }
  const driver = server.host.driver!;

  // 1. The bare data port, both ways: the same number of bytes, no frames, no files. 2. A file of the
  // same size through the API: PUT, then GET (random bytes: nothing compresses). ROUNDS of each and
  // their p50s (one transfer's rate swung 37–53 MiB/s between runs); the bare port's rounds first: its
  // raw bytes must not meet a late frame of a file's stream on the port (interleaved, a PUT hung).
  // Both through Node's http client, as the previews benchmark's 50 MiB: read through fetch's web
  // streams, the GET cost this process (the server's, on the same two cores) enough to take it from
  // 64 to 37–53 MiB/s.
  const data = randomBytes(BYTES);
  const rates = { ...(await bareChannelRates(driver, vmId, BYTES, ROUNDS)), up: [] as number[], down: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    let t = performance.now();
    const put = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        `${base}/v1/api/vms/${vmId}/files?path=bench.bin`,
        { method: 'PUT', headers: { authorization: h.authorization, 'content-type': 'application/octet-stream' }, agent: false },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        },
      );
      req.on('error', reject);
      req.end(data);
    });
    if (put.status !== 201) throw new Error(`upload: ${put.status} ${put.text}`);
    rates.up.push(mibps(BYTES, performance.now() - t));
    t = performance.now();
    const got = await new Promise<number>((resolve, reject) => {
      http.get(`${base}/v1/api/vms/${vmId}/files?path=bench.bin`, { headers: { authorization: h.authorization }, agent: false }, (res) => {
        let n = 0;
        res.on('data', (d: Buffer) => (n += d.length));
        res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`download: ${res.statusCode}`))));
      }).on('error', reject);
    });
    if (got !== BYTES) throw new Error(`download: ${got} bytes of ${BYTES}`);
    rates.down.push(mibps(BYTES, performance.now() - t));
  }
  const [rawIn, rawOut, up, down] = [rates.rawIn, rates.rawOut, rates.up, rates.down].map((xs) => pct(xs, 50));

  // 3. Latency: pings through the agent, and keystrokes echoed by a shell (bash's line editor), in turns.
  const ticket = await (await fetch(`${base}/v1/api/vms/${vmId}/shell`, { method: 'POST', headers: h })).json();
  const ws = new WebSocket(ticket.url);
  let out = '';
  let waiter: (() => void) | null = null;
  ws.on('message', (d) => {
    out += d.toString();
    waiter?.();
  });
  await new Promise((r) => ws.once('open', r));
  const waitFor = (s: string) =>
    new Promise<void>((resolve) => {
      const check = () => (out.includes(s) ? ((waiter = null), resolve()) : (waiter = check));
      check();
    });
  ws.send(Buffer.from('echo ready\n'));
  await waitFor('ready\r\n');
  await new Promise((r) => setTimeout(r, 500));
  const pings: number[] = [];
  const echoes: number[] = [];
  for (let i = 0; i < KEYS + 5; i++) {
    const p = await driver.ping(vmId);
    const key = 'abcdefghijklmnopqrstuvwxyz'[i % 26];
    out = '';
    const e0 = performance.now();
    ws.send(Buffer.from(key));
    await waitFor(key);
    const e = performance.now() - e0;
    if (i >= 5) (pings.push(p), echoes.push(e));
  }
  ws.send(Buffer.from('\x15exit\n'));
  ws.close();

  const pingP50 = pct(pings, 50);
  const echoP50 = pct(echoes, 50);
  await report(`Shells and files (${MIB} MiB ${ROUNDS} times each way, ${KEYS} keystrokes)`, [
    row('files', `upload ${MIB} MiB (PUT), p50`, fmt(up), `bare port in ${fmt(rawIn)}`, up / rawIn, '≥ 50%', up / rawIn >= 0.5),
    row('files', `download ${MIB} MiB (GET), p50`, fmt(down), `bare port out ${fmt(rawOut)}`, down / rawOut, '≥ 50%', down / rawOut >= 0.5),
    row('files', 'shell keystroke echo p50', `${echoP50.toFixed(2)} ms`, `agent ping p50 ${pingP50.toFixed(2)} ms`, echoP50 / pingP50, '≤ 2×', echoP50 <= 2 * pingP50),
    row('files', 'shell keystroke echo p90', `${pct(echoes, 90).toFixed(2)} ms`, `agent ping p90 ${pct(pings, 90).toFixed(2)} ms`),
  ]);
} finally {
  await close();
}
