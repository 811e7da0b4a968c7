// The gallery at scale: listTemplates with `q` over 100,000 public templates on a PostgreSQL server
// (a throwaway one started here on a loopback port), next to whoami on the same server in the same
// run. Target: p99 under 50 ms. Needs PostgreSQL's server binaries (Debian's postgresql package).
import autocannon from 'autocannon';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, readdirSync } from 'node:fs';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { report, row } from './report.ts';

const TEMPLATES = Number(process.env.BENCH_TEMPLATES ?? 100_000);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 10;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

const pgBin = path.join('/usr/lib/postgresql', readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b)).at(-1)!, 'bin');
const dir = await mkdtemp(path.join(tmpdir(), 'agentvm-gallery-'));
const asPg = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
const pgRun = (tool: string, args: string[]) => execFileSync(asPg[0] ?? path.join(pgBin, tool), [...asPg.slice(1), ...(asPg.length ? [path.join(pgBin, tool)] : []), ...args], { stdio: 'ignore' });
if (asPg.length) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
const port = await freePort();
let server: ChildProcess | undefined;
try {
  pgRun('initdb', ['-D', `${dir}/data`, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  pgRun('pg_ctl', ['-D', `${dir}/data`, '-l', `${dir}/log`, '-w', '-o', `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off`, 'start']);
  const databaseUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
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
  try {
    pgRun('pg_ctl', ['-D', `${dir}/data`, '-m', 'immediate', 'stop']);
  } catch {
    // not started
  }
  await new Promise((r) => setTimeout(r, 300));
  if (process.env.BENCH_KEEP) console.error(await readFile(path.join(dir, 'log'), 'utf8').catch(() => ''));
  await rm(dir, { recursive: true, force: true });
}
