// `npm run bench`: every benchmark of the project in one go, then one table of their figures, each
// with its baseline from the same run and its target, also written to bench/RESULTS.md.
// Needs QEMU, PostgreSQL's server binaries and a built guest image (AGENTVM_IMAGE_DIR, default
// /var/cache/agentvm/images; built here when missing).
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { table, type Row } from './report.ts';
import { chooseAccel } from '../src/vmm/probe.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const BENCHES = [
  { id: 'startup', file: 'startup.bench.ts', what: 'agentvm --version, whoami and vms list vs node -e 0; kill -9 of serve → listening; idle serve memory' },
  { id: 'api', file: 'api.bench.ts', what: 'API throughput: whoami, listHarnesses vs a bare route' },
  { id: 'gallery', file: 'gallery.bench.ts', what: 'listTemplates with q over 100,000 templates on PostgreSQL' },
  { id: 'lifecycle', file: 'vm.bench.ts', what: 'create → running from snapshots vs cold boots; create → first echo; suspend and resume; idle memory; 20 at once' },
  { id: 'branch', file: 'branch.bench.ts', what: 'a branch: the VM paused vs suspend; branch → running vs a resume; a branch of 10 vs their QEMU CPU; the disk they add vs their memory' },
  { id: 'fork', file: 'fork.bench.ts', what: 'fork of a 1 GiB template vs an empty one' },
  { id: 'images', file: 'images.bench.ts', what: 'an image build vs the same steps in a VM; a cached rebuild; a VM of an image vs a base VM' },
  { id: 'run', file: 'run.bench.ts', what: 'echo run through the API vs the guest agent directly' },
  { id: 'runs', file: 'runs.bench.ts', what: 'a run live: first line at a watcher vs the guest; 50 watchers of one run' },
  { id: 'scaleout', file: 'scaleout.bench.ts', what: 'two API replicas and three hosts vs one host' },
  { id: 'console', file: 'console.bench.ts', what: 'the web console: each page first render with 100 VMs and 100,000 templates; JavaScript per page' },
  { id: 'egress', file: 'egress.bench.ts', what: 'the egress gateway: added latency and MiB/s from inside a VM vs the host' },
  { id: 'webhooks', file: 'webhooks.bench.ts', what: 'event → first webhook attempt; whoami with 1,000 deliveries queued to a dead receiver' },
  { id: 'files', file: 'files.bench.ts', what: "shells and files: 100 MiB in and out vs the bare data port; keystroke echo vs an agent ping" },
  { id: 'e2b', file: 'e2b.bench.ts', what: "E2B's SDK: Sandbox.create → first command vs create → running → run; commands.run vs POST /run" },
  { id: 'previews', file: 'previews.bench.ts', what: 'preview URLs: a page and an SSE event vs the same in the guest; 50 MiB vs the bare data port; a wake vs a start' },
];
const only = process.argv.slice(2);
const imageDir = process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images';

function run(cmd: string, args: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });
}

const work = await mkdtemp(path.join(os.tmpdir(), 'agentvm-bench-all-'));
const rows: Row[] = [];
const timings: string[] = [];
const t0 = Date.now();
try {
  if ((await run(process.execPath, ['bin/agentvm.js', 'image', 'build', '--image-dir', imageDir], {})) !== 0) throw new Error('building the guest image failed');
  for (const b of BENCHES.filter((x) => only.length === 0 || only.includes(x.id))) {
    const file = path.join(work, `${b.id}.rows`);
    const started = Date.now();
    console.error(`\n== ${b.id}: ${b.what}`);
    const code = await run(process.execPath, ['--import', 'tsx', path.join('bench', b.file)], { BENCH_ROWS_FILE: file, AGENTVM_IMAGE_DIR: imageDir });
    const got = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Row);
    if (code !== 0) got.push({ bench: b.id, measure: 'the benchmark failed', value: `exit ${code}`, baseline: '', ratio: null, target: '', met: false });
    rows.push(...got);
    timings.push(`${b.id} ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }
} finally {
  await rm(work, { recursive: true, force: true });
}
const accel = (await chooseAccel()).accel;
const total = ((Date.now() - t0) / 1000).toFixed(0);
const text = [
  '# Benchmark results',
  '',
  `Written by \`npm run bench\` on ${new Date().toISOString()}: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ` +
    `${Math.round(os.totalmem() / 2 ** 30)} GiB, VMs under ${accel.toUpperCase()}, Node ${process.version}. Took ${total} s (${timings.join(', ')}).`,
  '',
  'Every ratio is a figure over its baseline measured in the same run (these machines are noisy, so',
  'absolute figures from different runs do not compare).',
  '',
  table(rows),
  '',
].join('\n');
console.log(`\n${text}`);
if (only.length === 0) await writeFile(path.join(here, 'RESULTS.md'), text);
const unmet = rows.filter((r) => r.met === false);
if (unmet.length) console.error(`\n${unmet.length} target(s) not met: ${unmet.map((r) => `${r.bench}: ${r.measure}`).join('; ')}`);
