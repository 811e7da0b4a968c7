// The web console at scale: each page's first render (the whole HTML document, server time as seen on
// loopback) with 100 VMs and 100,000 templates on a PostgreSQL server (a throwaway one started here), next
// to whoami on the same server in the same run; and the JavaScript each page ships, compressed, next to
// htmx alone. Targets: p95 ≤ 200 ms a page; ≤ 150 KiB of compressed JavaScript a page, except the terminal's
// (xterm.js alone is about 86 KiB; it loads on that page only), whose weight is reported as excepted.
import http from 'node:http';
import { report, row, pct, type Row } from './report.ts';
import { startPostgres } from './postgres.ts';
import { openDb } from '../src/store/db.ts';
import { startConsoleServer } from '../test/consoleServer.ts';
import { insertVm } from '../test/helpers.ts';
import * as runStore from '../src/store/runs.ts';
import { newId } from '../src/domain/ids.ts';
import { OVER_BUDGET, type PageKind } from '../src/console/assets.ts';

const TEMPLATES = Number(process.env.BENCH_TEMPLATES ?? 100_000);
const VMS = 100;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 100);
const MAX_MS = 200;
const MAX_JS_KIB = 150;

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One GET on loopback: status, milliseconds to the last byte, and the body's bytes as sent (compressed if so). */
function get(url: string, headers: Record<string, string>): Promise<{ status: number; ms: number; bytes: number; body: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    http
      .get(url, { agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const buf = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, bytes: buf.length, body: buf.toString('utf8') });
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

const pgServer = await startPostgres();
try {
  const db = await openDb({ databaseUrl: pgServer.url });
  const server = await startConsoleServer(db);
  try {
    const tenant = await server.tenant('console-bench@example.com');
    const vmIds: string[] = [];
    for (let i = 0; i < VMS; i++) vmIds.push(await insertVm(db, tenant.tenantId, { status: i % 3 === 0 ? 'stopped' : 'running' }));
    const runId = newId('run');
    await runStore.insert(db, {
      run_id: runId, tenant_id: tenant.tenantId, vm_id: vmIds[0], task: 'print the date', harness: 'echo', model: null, provider: null,
      argv: ['echo'], env: {}, timeout_ms: 60_000, max_output_bytes: 1 << 20, boots: 0, created_at: new Date(),
    });
    await runStore.appendEvents(db, runId, Array.from({ length: 200 }, (_, i) => ({ seq: i + 1, stream: 'stdout' as const, text: `line ${i}: ${'x'.repeat(60)}\n` })));
    await runStore.finish(db, runId, { status: 'succeeded', exit_code: 0, timed_out: false, duration_ms: 1000, first_output_ms: 5, status_reason: null, finished_at: new Date() });
    const words = ['python', 'rust', 'django', 'react', 'postgres', 'kubernetes', 'terraform', 'nextjs', 'fastapi', 'golang'];
    await db.query(
      `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, tags, forks, stars, size_bytes, status)
       SELECT 'tpl_bench' || g, NULL, 'bench-' || g, ($1::text[])[1 + (g / 7) % 10] || ' workspace ' || g,
              'a ' || ($1::text[])[1 + g % 10] || ' starter with ' || ($1::text[])[1 + (g / 10) % 10], 'echo', 'public',
              ARRAY[($1::text[])[1 + g % 10]], g % 97, g % 31, 0, 'ready'
       FROM generate_series(1, $2::int) g`,
      [words, TEMPLATES],
    );
    await db.query('ANALYZE templates');

    // Signed in the way a person is: the code from the server's log traded for a session.
    await server.services.login.start(tenant.email);
    const { token } = await server.services.sessions.signIn(tenant.email, server.codeFromLog(tenant.email));
    const cookie = { cookie: `avm_session=${token}` };
    const auth = { authorization: `Bearer ${tenant.key}` };

    const measure = async (path: string, headers: Record<string, string>) => {
      for (let i = 0; i < 5; i++) await get(`${server.url}${path}`, headers); // warm-up
      const ms: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const r = await get(`${server.url}${path}`, headers);
        if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
        ms.push(r.ms);
      }
      return { p50: pct(ms, 50), p95: pct(ms, 95) };
    };
    const baseline = await measure('/v1/api/whoami', auth);
    const base = `${baseline.p95.toFixed(1)} whoami`;
    const pages: { name: string; path: string; kind: PageKind }[] = [
      { name: 'sign in', path: '/console/login', kind: 'base' },
      { name: `VMs (${VMS})`, path: '/console/vms', kind: 'base' },
      { name: 'a VM', path: `/console/vms/${vmIds[0]}`, kind: 'base' },
      { name: 'a run (200 lines)', path: `/console/vms/${vmIds[0]}/runs/${runId}`, kind: 'run' },
      { name: `templates, first page (${TEMPLATES})`, path: '/console/templates', kind: 'base' },
      { name: 'templates, search "rust kubernetes"', path: '/console/templates?q=rust+kubernetes', kind: 'base' },
      { name: 'templates, most forked, page 40', path: '/console/templates?sort=forks&offset=960', kind: 'base' },
      { name: 'billing and usage', path: '/console/billing', kind: 'billing' },
      { name: 'API keys', path: '/console/keys', kind: 'base' },
      { name: 'a VM\'s terminal', path: `/console/vms/${vmIds[1]}/terminal`, kind: 'terminal' },
    ];
    const rows: Row[] = [];
    const scriptsOf = new Map<PageKind, string[]>();
    for (const p of pages) {
      const r = await measure(p.path, p.path === '/console/login' ? {} : cookie);
      rows.push(row('console', `first render, ${p.name}: p95 ms (p50)`, `${r.p95.toFixed(1)} (${r.p50.toFixed(1)})`, base, r.p95 / baseline.p95, `p95 ≤ ${MAX_MS} ms`, r.p95 <= MAX_MS));
      const html = (await get(`${server.url}${p.path}`, p.path === '/console/login' ? {} : cookie)).body;
      // Scripts, and the ES modules they import that the page preloads.
      scriptsOf.set(p.kind, [...html.matchAll(/<script src="([^"]+)"|<link rel="modulepreload" href="([^"]+)"/g)].map((m) => m[1] ?? m[2]));
    }
    const gzBytes = async (src: string) => (await get(`${server.url}${src}`, { 'accept-encoding': 'gzip' })).bytes;
    const htmx = await gzBytes(scriptsOf.get('base')!.find((s) => s.includes('htmx'))!);
    for (const [kind, scripts] of scriptsOf) {
      let total = 0;
      for (const s of scripts) total += await gzBytes(s);
      const kib = total / 1024;
      const excepted = OVER_BUDGET.has(kind);
      rows.push(
        row(
          'console',
          `JavaScript shipped, ${kind} page${excepted ? '' : 's'}: KiB gzip (${scripts.length} files)`,
          kib.toFixed(1),
          `${(htmx / 1024).toFixed(1)} htmx alone`,
          total / htmx,
          excepted ? `excepted from ≤ ${MAX_JS_KIB} KiB (xterm.js; on this page only)` : `≤ ${MAX_JS_KIB} KiB`,
          excepted ? null : kib <= MAX_JS_KIB,
        ),
      );
    }
    await report(`Console: ${VMS} VMs, ${TEMPLATES} templates on PostgreSQL, ${SAMPLES} sequential renders a page`, rows);
  } finally {
    await server.close();
    await db.close();
  }
} finally {
  agent.destroy();
  await pgServer.stop();
}
