// The gallery at scale: listTemplates with `q` over 100,000 public templates on a PostgreSQL server
// (a throwaway one started here on a loopback port), next to whoami on the same server in the same
// run. Target: p99 under 50 ms. Needs PostgreSQL's server binaries (Debian's postgresql package).
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { report, row } from './report.ts';
import { startPostgres } from './postgres.ts';

const TEMPLATES = Number(process.env.BENCH_TEMPLATES ?? 100_000);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 10;

const pgServer = await startPostgres();
const dir = pgServer.dir;
let server: ChildProcess | undefined;
try {
  const databaseUrl = pgServer.url;
  const dataDir = path.join(dir, 'agentvm');
  const out = await open(path.join(dir, 'server.log'), 'w');
  server = spawn(process.execPath, ['bin/agentvm.js', 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, DATABASE_URL: databaseUrl, AGENTVM_RATE_LIMIT: '1000000', AGENTVM_RATE_BURST: '1000000', AGENTVM_IMAGE_BUILD: 'off' },
    stdio: ['ignore', out.fd, 'inherit'],
  });
  await out.close();
  let url = '';
  for (let i = 0; i < 600 && !url; i++) {
    url = /"url":"(http:\/\/[^"]+)"/.exec(await readFile(path.join(dir, 'server.log'), 'utf8'))?.[1] ?? '';
    if (!url) await new Promise((r) => setTimeout(r, 100));
  }
  if (!url) throw new Error('the server did not start');
  const adminToken = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  const tenant = await (
    await fetch(`${url}/v1/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ email: 'gallery@example.com' }) })
  ).json();
  // 100,000 public templates of others (the platform's, so no tenant rows are needed), with words to
  // search for; the caller browses the gallery.
  const db = new pg.Client({ connectionString: databaseUrl });
  db.on('error', (err) => console.error(`database: ${err.message}`));
  await db.connect();
  const words = ['python', 'rust', 'django', 'react', 'postgres', 'kubernetes', 'terraform', 'nextjs', 'fastapi', 'golang'];
  await db.query(
    `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, tags, forks, stars, size_bytes, status)
     SELECT 'tpl_bench' || g, NULL, 'bench-' || g, ($1::text[])[1 + (g / 7) % 10] || ' workspace ' || g,
            'a ' || ($1::text[])[1 + g % 10] || ' starter with ' || ($1::text[])[1 + (g / 10) % 10], 'echo', 'public',
            ARRAY[($1::text[])[1 + g % 10]], g % 97, g % 31, 0, 'ready'
     FROM generate_series(1, $2) g`,
    [words, TEMPLATES],
  );
  await db.query('ANALYZE templates');
  await db.end();

  const auth = { authorization: `Bearer ${tenant.api_key}` };
  const load = async (p: string) => {
    const r = await autocannon({ url: `${url}${p}`, connections: CONNECTIONS, duration: DURATION, headers: auth });
    if (r.non2xx || r.errors) throw new Error(`${p}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return { rps: r.requests.average, p99: r.latency.p99 };
  };
  await load('/v1/api/whoami'); // warm-up
  const whoami = await load('/v1/api/whoami');
  const search = await load('/v1/api/templates?q=rust%20kubernetes&limit=20');
  const trending = await load('/v1/api/templates?limit=20');
  await report(`Gallery: ${TEMPLATES} public templates on PostgreSQL, ${CONNECTIONS} connections, ${DURATION} s each`, [
    row('gallery', 'listTemplates q="rust kubernetes": p99 ms (req/s)', `${search.p99} (${Math.round(search.rps)})`, `${whoami.p99} (${Math.round(whoami.rps)}) whoami`, search.rps / whoami.rps, 'p99 < 50 ms', search.p99 < 50),
    row('gallery', 'listTemplates trending, first page: p99 ms (req/s)', `${trending.p99} (${Math.round(trending.rps)})`, `${whoami.p99} (${Math.round(whoami.rps)}) whoami`, trending.rps / whoami.rps, 'p99 < 50 ms', trending.p99 < 50),
  ]);
} finally {
  server?.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  await pgServer.stop();
}
