import { copyFile, mkdir, readdir, readFile, readlink, realpath } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import net from 'node:net';
import pg from 'pg';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { dumpDb, openDb, type Db } from '../src/store/db.ts';
import type { Mailer } from '../src/domain/login.ts';
import { buildCoreServices, buildServices, type Services } from '../src/domain/services.ts';
import { buildApp } from '../src/api/app.ts';
import { createLogger } from '../src/log.ts';
import { newId, randomBase62 } from '../src/domain/ids.ts';
import * as runStore from '../src/store/runs.ts';
import type { VmExecutor } from '../src/domain/runs.ts';
import type { Clock } from '../src/domain/clock.ts';
import type { DriverProbe } from '../src/vmm/probe.ts';
import type { BaseImageSource } from '../src/domain/baseImage.ts';

/** The databases the suite runs on: always PGlite; a PostgreSQL server too when AGENTVM_TEST_DATABASE_URL is set. */
export function backends(): { name: 'pglite' | 'postgres'; url?: string }[] {
  const url = process.env.AGENTVM_TEST_DATABASE_URL;
  return url ? [{ name: 'pglite' }, { name: 'postgres', url }] : [{ name: 'pglite' }];
}

let migratedPglite: Promise<Blob> | undefined;

/** A migrated embedded database, made once per test process: each fresh one starts as its copy (~5× faster than initdb). */
function migratedDump(): Promise<Blob> {
  migratedPglite ??= (async () => {
    const db = await openDb({ pgliteDir: 'memory://' });
    try {
      return await dumpDb(db);
    } finally {
      await db.close();
    }
  })();
  return migratedPglite;
}

/** A fresh database on the backend: PGlite in memory, or a new database on the PostgreSQL server. */
export async function freshDb(backend: { name: string; url?: string }): Promise<{ db: Db; drop: () => Promise<void> }> {
  if (!backend.url) {
    const db = await openDb({ pgliteDir: 'memory://', pgliteDump: await migratedDump() });
    return { db, drop: () => db.close() };
  }
  const name = `agentvm_test_${randomBase62(12).toLowerCase()}`;
  const admin = new pg.Client({ connectionString: backend.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(backend.url);
  url.pathname = `/${name}`;
  const db = await openDb({ databaseUrl: url.toString() });
  return {
    db,
    drop: async () => {
      await db.close();
      const c = new pg.Client({ connectionString: backend.url });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name}`);
      await c.end();
    },
  };
}

/** The VM driver as the API sees it; the real probe is tested in server.test.ts. */
export const usableDriver = async (): Promise<DriverProbe> => ({ usable: true, accel: 'tcg', qemu: '/usr/bin/qemu-system-x86_64', detail: 'tcg: test' });

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface TestApp {
  services: Services;
  db: Db;
  adminToken: string;
  logs: string[];
  request(
    method: string,
    path: string,
    opts?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string>; allowServerError?: boolean },
  ): Promise<TestResponse>;
  admin(method: string, path: string, body?: unknown): Promise<TestResponse>;
  /** A tenant with a readwrite key, optionally a card and credits. */
  tenant(opts?: { card?: string; credits?: number }): Promise<{ tenantId: string; key: string; email: string }>;
  close(): Promise<void>;
}

export async function createTestApp(
  backend: { name: string; url?: string },
  opts: {
    clock?: Clock;
    rateLimit?: { perSecond: number; burst: number };
    driver?: () => Promise<DriverProbe>;
    mailer?: Mailer;
    /** Stands in for a VM host's capturer, so that a capture is accepted without QEMU. */
    capture?: (templateId: string) => void;
    /** Webhook hosts allowed http and loopback (AGENTVM_WEBHOOK_ALLOW_HOSTS). */
    webhookAllowHosts?: Set<string>;
    /** The guest image a VM host would report (GET /v1/api/images/base); none by default. */
    baseImage?: BaseImageSource;
  } = {},
): Promise<TestApp> {
  const { db, drop } = await freshDb(backend);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const services = buildServices(
    buildCoreServices(db, { clock: opts.clock }),
    { driver: opts.driver ?? usableDriver, capture: opts.capture, baseImage: opts.baseImage },
    { mailer: opts.mailer, webhookAllowHosts: opts.webhookAllowHosts },
  );
  const adminToken = `avm_admin_${randomBase62(40)}`;
  const app = buildApp({
    services,
    log: createLogger('info', sink),
    adminToken,
    rateLimit: opts.rateLimit ?? { perSecond: 10_000, burst: 10_000 },
  });
  const contract = await contractValidator(app);

  const request: TestApp['request'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    let body: string | undefined = o.raw;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await app.request(path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    const out = { status: res.status, headers: res.headers, body: parsed, text };
    contract.check(method, path, out, o.allowServerError);
    return out;
  };
  let tenants = 0;
  const test: TestApp = {
    services,
    db,
    adminToken,
    logs,
    request,
    admin: (method, path, body) => request(method, path, { key: adminToken, body }),
    async tenant(t = {}) {
      const email = `t${++tenants}-${randomBase62(6).toLowerCase()}@example.com`;
      const res = await test.admin('POST', '/v1/admin/tenants', { email });
      if (res.status !== 201) throw new Error(`tenant create failed: ${res.text}`);
      const { tenant_id: tenantId, api_key: key } = res.body;
      if (t.card) await test.admin('PUT', `/v1/admin/tenants/${tenantId}/card`, { brand: 'visa', last4: t.card });
      if (t.credits) await test.admin('POST', `/v1/admin/tenants/${tenantId}/credits`, { amount_cents: t.credits });
      return { tenantId, key, email };
    },
    // As the server does: the feeds' LISTEN connections end before the database does.
    close: async () => {
      await services.runFeed.close();
      await services.vmFeed.close();
      await drop();
    },
  };
  return test;
}

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: { 'application/json': { schema: object } } }> }>>; components: object };

/**
 * Checks every response against the served OpenAPI documents: the operation's declared status and schema,
 * the Error shape on every non-2xx, and an X-Request-Id header on everything.
 */
async function contractValidator(app: { request: (p: string) => Response | Promise<Response> }) {
  const docs: Doc[] = [
    await (await app.request('/v1/api/openapi.json')).json(),
    await (await app.request('/v1/admin/openapi.json')).json(),
  ];
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  docs.forEach((doc, i) => ajv.addSchema({ $id: `doc${i}`, components: doc.components }));
  const compiled = new Map<string, ValidateFunction>();
  const routes = docs.flatMap((doc, i) =>
    Object.entries(doc.paths).map(([p, ops]) => ({
      pattern: new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      ops,
      doc: i,
      path: p,
    })),
  );
  const errorSchema = ajv.compile({ $ref: 'doc0#/components/schemas/Error' });
  const rewrite = (schema: object, i: number) =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"doc${i}#/components/`));

  return {
    check(method: string, url: string, res: TestResponse, allowServerError = false) {
      const where = `${method} ${url} → ${res.status}`;
      if (!res.headers.get('x-request-id')) throw new Error(`${where}: no X-Request-Id`);
      if (res.status >= 500 && res.status !== 503 && !allowServerError) throw new Error(`${where}: server error ${res.text}`);
      // A HEAD answer has the headers of the GET and no body.
      if (method === 'HEAD') return;
      if (res.status >= 400 || res.status < 200) {
        if (!res.headers.get('content-type')?.startsWith('application/json')) throw new Error(`${where}: error not JSON`);
        if (!errorSchema(res.body)) throw new Error(`${where}: not the Error shape: ${res.text}`);
      }
      const pathOnly = url.split('?')[0];
      const route = routes.find((r) => r.pattern.test(pathOnly) && r.ops[method.toLowerCase()]);
      if (!route) return;
      const op = route.ops[method.toLowerCase()];
      const declared = op.responses[String(res.status)];
      if (!declared) {
        // Unknown paths and methods are answered before any operation runs.
        if (res.status === 404 || res.status === 405) return;
        throw new Error(`${where}: status not declared in the OpenAPI document`);
      }
      const schema = declared.content?.['application/json']?.schema;
      // A success of bytes (a file's) is checked by its own test; the schema is of the JSON form.
      if (!schema || !res.headers.get('content-type')?.startsWith('application/json')) return;
      const id = `${route.doc}:${method}:${route.path}:${res.status}`;
      let validate = compiled.get(id);
      if (!validate) {
        validate = ajv.compile(rewrite(schema, route.doc));
        compiled.set(id, validate);
      }
      if (!validate(res.body)) {
        throw new Error(`${where}: response does not match the contract: ${ajv.errorsText(validate.errors)}\n${res.text}`);
      }
    },
  };
}

/** Puts a VM row straight into the table, for tests of reads that come before VMs can be created. */
export async function insertVm(
  db: Db,
  tenantId: string,
  fields: { plan?: string | null; cycle?: string | null; tier?: string | null; status?: string; deleted?: boolean } = {},
): Promise<string> {
  const vmId = `vm_${randomBase62(22)}`;
  const tier = fields.tier ?? null;
  const plan = tier ? null : (fields.plan ?? 'starter');
  const cycle = tier ? null : (fields.cycle ?? 'monthly');
  const status = fields.status ?? 'running';
  await db.query(
    `INSERT INTO vms (vm_id, tenant_id, plan, cycle, tier, harness, vcpus, memory_mib, disk_gib, status, desired_state, ipv4, deleted_at)
     VALUES ($1, $2, $3, $4, $5, 'echo', 1, 1024, 10, $6, $7, $8, $9)`,
    [vmId, tenantId, plan, cycle, tier, status, status === 'stopped' ? 'stopped' : 'running',
      status === 'running' ? '10.0.2.15' : null, fields.deleted ? new Date() : null],
  );
  return vmId;
}

/**
 * Runs a command line (not a harness task: the API runs only those) in a VM the way a run goes: a row
 * in the runs table, started and recorded by the VM's host. Answers the finished run.
 */
export async function rawRun(
  services: Services,
  executor: VmExecutor,
  vmId: string,
  argv: string[],
  o: { timeoutMs?: number; maxOutputBytes?: number } = {},
): Promise<runStore.RunRow> {
  const [vm] = await services.db.query<{ tenant_id: string; boots: number; harness: string }>('SELECT tenant_id, boots, harness FROM vms WHERE vm_id = $1', [vmId]);
  const runId = newId('run');
  await runStore.insert(services.db, {
    run_id: runId,
    tenant_id: vm.tenant_id,
    vm_id: vmId,
    task: argv.join(' '),
    harness: vm.harness,
    model: null,
    provider: null,
    argv,
    env: {},
    timeout_ms: o.timeoutMs ?? 60_000,
    max_output_bytes: o.maxOutputBytes ?? 4 * 1024 * 1024,
    boots: vm.boots,
    created_at: new Date(),
  });
  executor.kickRuns(vmId);
  return services.runs.waitFor(runId, (o.timeoutMs ?? 60_000) + 120_000);
}

/** A clock a test moves by hand (one per test: tests never share one). */
export class ManualClock implements Clock {
  constructor(public t = Date.parse('2026-11-01T00:00:00Z')) {}
  now(): Date {
    return new Date(this.t);
  }
}

/**
 * A shell line (for `sh -c`) that starts `line` in a session of its own and returns only once it is
 * there: an exec's process group is killed when the exec ends, and a child still on its way to
 * setsid() would go with it. `line` may use the outer shell's "$0", "$1"… but no single quote.
 */
export function detached(line: string): string {
  const mark = `/tmp/.detached-${randomBase62(8)}`;
  return `setsid sh -c ': > ${mark}; exec ${line}' "$0" "$@" </dev/null & until [ -e ${mark} ]; do sleep 0.05; done; rm -f ${mark}`;
}

/** Polls `fn` every 200 ms until it answers something truthy; fails with the last error after `ms`. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 180_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * The golden snapshots made once for the whole run: scripts/test-all.sh has a server make the starter
 * shape's while the types are checked, into AGENTVM_TEST_SNAPSHOT_DIR (marked `.ready` or `.failed`
 * when done). Put into a new data dir before its server starts, they spare that server booting and
 * saving a golden VM of its own (17-25 s under TCG, while the test's own VMs wait or boot cold). The
 * memory file is linked (clones map it copy-on-write: nothing writes to it); the other files are
 * copied (a test damages the state). Without the variable, or when that build failed, the server
 * makes its own as always. Answers whether it put them there.
 */
export async function seedSnapshots(dataDir: string): Promise<boolean> {
  const from = process.env.AGENTVM_TEST_SNAPSHOT_DIR;
  if (!from) return false;
  const deadline = Date.now() + 15 * 60_000;
  while (!existsSync(path.join(from, '.ready'))) {
    if (existsSync(path.join(from, '.failed')) || Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const dir of await readdir(from, { withFileTypes: true })) {
    // A snapshot's folder has its record (the making server's own folder is not one).
    if (!dir.isDirectory() || !existsSync(path.join(from, dir.name, 'meta.json'))) continue;
    const key = dir.name;
    const to = path.join(dataDir, 'snapshots', key);
    if (existsSync(to)) continue;
    await mkdir(to, { recursive: true, mode: 0o700 });
    for (const f of await readdir(path.join(from, key), { withFileTypes: true })) {
      if (!f.isFile()) continue;
      const [src, dst] = [path.join(from, key, f.name), path.join(to, f.name)];
      // Each server a copy of its own, holes kept: a link shares the inode, and whatever one server does to
      // its file (its owner, seen changed to a QEMU user's in the suite, then refused by every other server
      // as not root's own) would reach the rest.
      if (f.name === 'mem') await runCp(src, dst);
      else await copyFile(src, dst);
    }
  }
  return true;
}

/** `cp --sparse=always`: a golden memory file is mostly holes. */
function runCp(src: string, dst: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('cp', ['--sparse=always', src, dst], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`cp ${src}: ${err.trim()}`))));
  });
}

/** Pids of live QEMU processes whose command line names this directory. */
export async function qemuPidsUnder(dir: string): Promise<number[]> {
  const pids: number[] = [];
  // A VM that took a standby: its directory is a link to the standby's, which its QEMU's command line names.
  const real = await realpath(dir).catch(() => dir);
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if ((cmd.startsWith('qemu-system') || cmd.includes('/qemu-system')) && (cmd.includes(dir) || cmd.includes(real))) {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
      if (!/\) Z /.test(stat)) pids.push(Number(entry));
    }
  }
  return pids;
}

/**
 * The QEMU processes under `dir` that run VMs: a host's standby VMs (a vms/sb_* directory that no VM's
 * link names: made ahead of need, no VM's yet) aside.
 */
export async function vmQemuPidsUnder(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await qemuPidsUnder(dir)) {
    const cmd = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const m = /([^\0]*\/vms)\/(sb_[0-9a-f]+)\//.exec(cmd);
    let standby = false;
    if (m) {
      standby = true;
      for (const n of await readdir(m[1]).catch(() => [] as string[])) {
        if ((await readlink(path.join(m[1], n)).catch(() => null)) === m[2]) standby = false;
      }
    }
    if (!standby) pids.push(pid);
  }
  return pids;
}

/** Kills the QEMU processes a test started under its directory (VMs outlive their server by design). */
export async function killQemusUnder(dir: string): Promise<void> {
  for (const pid of await qemuPidsUnder(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** A TCP port free on loopback now (for a process started with --port). */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

/** A JSON call to the API with a bearer key: status, parsed body (undefined when empty) and headers. */
export type ApiCall = (method: string, p: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any; headers: Headers }>;

/** Calls on `base` (or on what `base()` answers now: a server that restarts on another port) with `key`. */
export function apiClient(base: string | (() => string), key: string): ApiCall {
  return async (method, p, body, headers = {}) => {
    const res = await fetch(`${typeof base === 'string' ? base : base()}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };
}

const SERVER_BIN = fileURLToPath(new URL('../bin/agentvm.js', import.meta.url));

/**
 * Starts `agentvm serve` as a process of its own on a free port, with `env` over this process's
 * environment; answers it and its URL once it logs that it listens (a kill -9 test kills it).
 */
export async function spawnServer(dataDir: string, env: Record<string, string>): Promise<{ proc: ChildProcess; url: string }> {
  if (!existsSync(path.join(dataDir, 'snapshots'))) await seedSnapshots(dataDir);
  let out = '';
  const proc = spawn(process.execPath, [SERVER_BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stderr!.on('data', (d) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 60 s:\n${out.slice(-2000)}`)), 60_000);
    proc.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"agentvm is listening"'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line).url);
      }
    });
    proc.once('exit', (code) => reject(new Error(`exited ${code}:\n${out.slice(-2000)}`)));
  });
  return { proc, url };
}

/** Ends a server process (SIGTERM) if it still runs, and waits for it. */
export async function endServer(proc: ChildProcess | null): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await gone;
}
