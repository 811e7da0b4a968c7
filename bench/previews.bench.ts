// Preview URLs (issue 41): what the preview path adds to an app in a VM. In the same run, as baselines:
// the same requests from inside the guest (a client on the guest's loopback), the bare host↔guest data
// port for bytes, and the start of a suspended VM through the API. Targets: a small page's p50 through
// the preview ≤ +5 ms over the guest's own; 50 MiB through the preview ≥ 50% of the bare channel's
// MiB/s (each way); the first event of an SSE stream ≤ +10 ms over the guest's own; a request to a
// suspended `auto_resume` VM answered 200 in ≤ 1.3× the time the VM takes to start from suspended.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { pct, report, row } from './report.ts';
import { bareChannelRates, startBenchPlatform } from './platform.ts';

const N = Number(process.env.BENCH_PREVIEW_REQUESTS ?? 50);
const MIB = Number(process.env.BENCH_PREVIEW_MIB ?? 50);
const WAKES = Number(process.env.BENCH_PREVIEW_WAKES ?? 3);
const ROUNDS = Number(process.env.BENCH_PREVIEW_ROUNDS ?? 3);
const BYTES = MIB * 1024 * 1024;
const mibps = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);
const fmtRate = (x: number) => `${x.toFixed(1)} MiB/s`;
const ms = (x: number) => `${x.toFixed(2)} ms`;

const APP = String.raw`
const http = require('node:http');
const crypto = require('node:crypto');
let big = null;
http.createServer((req, res) => {
  if (req.url === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: first\n\n');
    return setTimeout(() => res.end('data: last\n\n'), 20);
  }
  if (req.url === '/big') {
    if (!big) big = crypto.randomBytes(${BYTES});
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big.length });
    return res.end(big);
  }
  if (req.url === '/upload') {
    let n = 0;
    req.on('data', (d) => (n += d.length));
    return req.on('end', () => res.end(String(n)));
  }
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<h1>hello</h1>');
}).listen(8080, '0.0.0.0');
`;

/** The same measure from inside the guest: each request on a new loopback connection, to its end or its first bytes. */
const CLIENT = String.raw`
const http = require('node:http');
const [path, n, first] = [process.argv[2], Number(process.argv[3]), process.argv[4] === 'first'];
const one = () => new Promise((resolve, reject) => {
  const t0 = performance.now();
  http.get({ host: '127.0.0.1', port: 8080, path, agent: false }, (res) => {
    if (first) res.once('data', () => (resolve(performance.now() - t0), res.resume()));
    else (res.resume(), res.on('end', () => resolve(performance.now() - t0)));
  }).on('error', reject);
});
(async () => { const out = []; for (let i = 0; i < n + 3; i++) out.push(await one()); console.log(JSON.stringify(out.slice(3))); })();
`;

const { server, h, call, untilStatus, untilRunning, close } = await startBenchPlatform('previewsbench');
try {
  const vmId = (await call('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'none', allow: [] } })).vm_id as string;
  await untilRunning(vmId, performance.now());
  const driver = server.host.driver!;
  const exec = async (line: string) => {
    const r = await driver.exec(vmId, { argv: ['sh', '-c', line] }, 600_000);
    if (r.exit_code !== 0) throw new Error(`${line.slice(0, 60)}: ${r.stderr}`);
    return r.stdout;
  };
  // The app in a session of its own (an exec's process group ends with the exec), once it has started.
  await exec(
    `cat > /tmp/app.js <<'EOF'\n${APP}\nEOF\ncat > /tmp/client.js <<'EOF'\n${CLIENT}\nEOF\n` +
      `setsid sh -c ': > /tmp/.app-up; exec node /tmp/app.js' </dev/null >/tmp/app.log 2>&1 & until [ -e /tmp/.app-up ]; do sleep 0.05; done`,
  );
  for (let i = 0; ; i++) {
    const ports = await call('GET', `/v1/api/vms/${vmId}/ports`);
    if (ports.data.some((p: { port: number }) => p.port === 8080)) break;
    if (i > 3000) throw new Error('the app never listened');
    await new Promise((r) => setTimeout(r, 100));
  }
  const host = `8080-${vmId.toLowerCase().replace(/_/g, '-')}.localhost:${server.port}`;
  const auth = h.authorization;

  /** A request through the preview on a new connection: ms to its end (or to its first body bytes), and its bytes. */
  const viaPreview = (opts: { path: string; method?: string; body?: Buffer; first?: boolean }) =>
    new Promise<{ ms: number; bytes: number; status: number; text: string }>((resolve, reject) => {
      const t0 = performance.now();
      const req = http.request({ host: '127.0.0.1', port: server.port, path: opts.path, method: opts.method ?? 'GET', agent: false, headers: { host, authorization: auth } }, (res) => {
        let bytes = 0;
        let text = '';
        if (opts.first) return res.once('data', () => (resolve({ ms: performance.now() - t0, bytes: 0, status: res.statusCode!, text: '' }), res.resume()));
        res.on('data', (d: Buffer) => ((bytes += d.length), text.length < 200 && (text += d.toString())));
        res.on('end', () => resolve({ ms: performance.now() - t0, bytes, status: res.statusCode!, text }));
      });
      req.on('error', reject);
      req.end(opts.body);
    });
  const series = async (path: string, first: boolean) => {
    const out: number[] = [];
    for (let i = 0; i < N + 3; i++) {
      const r = await viaPreview({ path, first });
      if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
      if (i >= 3) out.push(r.ms);
    }
    return out;
  };
  const inGuest = async (path: string, first: boolean) => JSON.parse(await exec(`node /tmp/client.js ${path} ${N} ${first ? 'first' : 'all'}`)) as number[];

  // 1. A small page, and 3. an SSE stream's first event: through the preview, then from inside the guest.
  const page = await series('/', false);
  const pageGuest = await inGuest('/', false);
  const sse = await series('/sse', true);
  const sseGuest = await inGuest('/sse', true);

  // 2. 50 MiB each way, ROUNDS times (one transfer's rate swung 31–45 MiB/s between runs), their p50s:
  // the bare data port first (its raw bytes must not meet a stream's frames on the port), then the preview.
  const rates = { ...(await bareChannelRates(driver, vmId, BYTES, ROUNDS)), down: [] as number[], up: [] as number[] };
  await viaPreview({ path: '/big' }); // the app makes its 50 MiB once (read to its end: not during the measure)
  const body = randomBytes(BYTES);
  for (let r = 0; r < ROUNDS; r++) {
    const down = await viaPreview({ path: '/big' });
    if (down.bytes !== BYTES) throw new Error(`download: ${down.bytes} bytes of ${BYTES}`);
    rates.down.push(mibps(BYTES, down.ms));
    const up = await viaPreview({ path: '/upload', method: 'POST', body });
    if (up.text !== String(BYTES)) throw new Error(`upload: the app counted ${up.text}`);
    rates.up.push(mibps(BYTES, up.ms));
  }
  // What the guest moves by itself: the same download by a client on its own loopback (after three unmeasured).
  const guestDown = pct((JSON.parse(await exec(`node /tmp/client.js /big ${ROUNDS} all`)) as number[]).map((m) => mibps(BYTES, m)), 50);
  const [rawIn, rawOut, downRate, upRate] = [rates.rawIn, rates.rawOut, rates.down, rates.up].map((xs) => pct(xs, 50));

  // 4. Waking: a start of the suspended VM through the API (to running), then a preview request to it
  // with auto_resume on (to its 200), in turns.
  await call('PATCH', `/v1/api/vms/${vmId}`, { auto_resume: true });
  const suspend = async () => {
    await call('POST', `/v1/api/vms/${vmId}/suspend`);
    await untilStatus(vmId, 'suspended', 0);
  };
  const starts: number[] = [];
  const wakes: number[] = [];
  const firsts: number[] = [];
  for (let i = 0; i < WAKES; i++) {
    await suspend();
    const t = performance.now();
    await call('POST', `/v1/api/vms/${vmId}/start`);
    starts.push(await untilRunning(vmId, t));
    const first = await viaPreview({ path: '/' });
    if (first.status !== 200) throw new Error(`first request after a start: ${first.status} ${first.text}`);
    firsts.push(first.ms);
    await suspend();
    const w = await viaPreview({ path: '/' });
    if (w.status !== 200) throw new Error(`wake: ${w.status} ${w.text}`);
    wakes.push(w.ms);
  }

  const added = (a: number[], b: number[]) => pct(a, 50) - pct(b, 50);
  const pageAdded = added(page, pageGuest);
  const sseAdded = added(sse, sseGuest);
  const wake = pct(wakes, 50);
  const start = pct(starts, 50);
  await report(`Preview URLs (${N} requests each, ${MIB} MiB ${ROUNDS} times each way, ${WAKES} wakes)`, [
    row('previews', 'small page p50 through the preview', ms(pct(page, 50)), `in the guest ${ms(pct(pageGuest, 50))}`, null, '≤ +5 ms', pageAdded <= 5),
    row('previews', 'small page p50 added', ms(pageAdded), ''),
    row('previews', `download ${MIB} MiB through the preview, p50`, fmtRate(downRate), `bare port out ${fmtRate(rawOut)}`, downRate / rawOut, '≥ 50%', downRate / rawOut >= 0.5),
    row('previews', `same: ${MIB} MiB from the app to a client on the guest's own loopback (what the guest moves by itself)`, fmtRate(guestDown), `through the preview ${fmtRate(downRate)}`, downRate / guestDown),
    row('previews', `upload ${MIB} MiB through the preview, p50`, fmtRate(upRate), `bare port in ${fmtRate(rawIn)}`, upRate / rawIn, '≥ 50%', upRate / rawIn >= 0.5),
    row('previews', 'first SSE event p50 through the preview', ms(pct(sse, 50)), `in the guest ${ms(pct(sseGuest, 50))}`, null, '≤ +10 ms', sseAdded <= 10),
    row('previews', 'first SSE event p50 added', ms(sseAdded), ''),
    row('previews', 'request to a suspended auto_resume VM → 200 (p50)', ms(wake), `start of the suspended VM → running ${ms(start)}`, wake / start, '≤ 1.3×', wake <= 1.3 * start),
    row('previews', "same: a VM's first request through the preview right after its start through the API (p50)", ms(pct(firsts, 50)), `the page's p50 ${ms(pct(page, 50))}`, pct(firsts, 50) / pct(page, 50)),
  ]);
} finally {
  await close();
}
