/**
 * Chaos: random operations against a real `agentvm serve` process with real VMs, `kill -9` of the
 * server at random moments, restarts on the same data dir, retries of lost answers with the same
 * Idempotency-Keys; then the invariants every crash must keep.
 *
 * Seeded: a failure prints the seed, and AGENTVM_CHAOS_SEED=<seed> runs the same operations and kill
 * moments again. AGENTVM_CHAOS_ROUNDS sets the rounds (CI's short form: 4; nights: 12 or more).
 * Runs on PGlite, and on PostgreSQL too when AGENTVM_TEST_DATABASE_URL is set. Needs the guest image
 * of `npm run test:all` (AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openDb, type Db } from '../src/store/db.ts';
import { TIERS } from '../src/domain/plans.ts';
import { randomBase62 } from '../src/domain/ids.ts';
import { checkSnapshot } from '../src/vmm/branch.ts';
import { killQemusUnder, qemuPidsUnder, seedSnapshots, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'needs AGENTVM_TEST_IMAGE_DIR (npm run test:all sets it)';
const ROUNDS = Number(process.env.AGENTVM_CHAOS_ROUNDS ?? 4);
const SEED = Number(process.env.AGENTVM_CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
const BIN = path.resolve('bin/agentvm.js');
const ADMIN = `avm_admin_chaos_${randomBase62(32)}`;

/** mulberry32: a small seeded generator, so that a seed replays the same run. */
function seeded(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T,>(xs: T[]) => xs[Math.floor(next() * xs.length)] };
}

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
}

/** A money POST: its key and body stay the same however often it is retried. */
interface MoneyCall {
  key: string;
  path: string;
  body: object;
  /** The VMs of every 201 answer for this key, each answer's ids joined by commas (all must be the same). */
  answers: string[];
  lost: boolean;
  tier: boolean;
}

interface KnownVm {
  desired: 'running' | 'stopped' | 'deleted';
  /** The highest persist_runs an echo run has answered (it may only grow). */
  persistRuns: number;
  tier: boolean;
}

type LifecycleOp = 'stop' | 'start' | 'restart' | 'reprovision' | 'destroy';

class Chaos {
  readonly rng = seeded(SEED);
  readonly money: MoneyCall[] = [];
  readonly vms = new Map<string, KnownVm>();
  /** Lifecycle calls whose answer was lost: issued again after the restart, so the desired state is known. */
  readonly lostLifecycle: Array<{ vmId: string; op: LifecycleOp }> = [];
  /** VMs a destroy was sent for: another operation at the same time may come after it, and find no VM. */
  readonly destroySent = new Set<string>();
  /**
   * Each VM's lifecycle calls, one after another: two at once on one VM may be answered in the other
   * order than the server took them, and the model would then keep the wrong one as the VM's desired state.
   */
  private readonly lifecycleChains = new Map<string, Promise<void>>();
  readonly templates: string[] = [];
  /** Snapshots whose create was answered 201 and that were not deleted. */
  readonly snapshots: string[] = [];
  /** Why snapshots were refused (a VM not running, or not yet re-adopted by its host): printed at the end. */
  readonly snapshotRefusals: string[] = [];
  /** Calls this test gave up waiting for (no kill cut them): printed at the end. */
  readonly timeouts: string[] = [];
  readonly serverErrors: string[] = [];
  readonly listenMs: number[] = [];
  readonly kills: string[] = [];
  /** Runs queued with `Prefer: respond-async`: each must end, whatever was killed under it. */
  readonly asyncRuns: Array<{ vmId: string; runId: string }> = [];
  key = '';
  tenantId = '';

  /** `procs[0]` answers the API (role all, or an API replica); the others are VM hosts (the scale-out form). */
  constructor(readonly procs: Proc[]) {}

  get api(): Proc {
    return this.procs[0];
  }

  where(): string {
    return `seed ${SEED} (AGENTVM_CHAOS_SEED=${SEED} AGENTVM_CHAOS_ROUNDS=${ROUNDS} replays it)`;
  }

  /** Starts a process and waits for its URL; the listen time is its own figure (process start → listening). */
  async start(p: Proc): Promise<void> {
    p.earlier = (p.earlier ?? '') + p.out.split('\n').filter((l) => l.includes('snap_')).join('\n');
    p.out = '';
    const proc = spawn(process.execPath, [BIN, ...p.args, '--port', '0', '--data-dir', p.dir], {
      env: { ...process.env, ...p.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    p.proc = proc;
    proc.stdout!.on('data', (d) => (p.out += d));
    proc.stderr!.on('data', (d) => (p.out += d));
    const line = await new Promise<{ url: string; listen_ms: number }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${p.name} did not listen within 60 s:\n${p.out.slice(-3000)}`)), 60_000);
      const look = () => {
        const m = /^.*"agentvm is listening".*$/m.exec(p.out);
        if (!m) return;
        clearTimeout(timer);
        proc.stdout!.off('data', look);
        resolve(JSON.parse(m[0]));
      };
      proc.stdout!.on('data', look);
      proc.once('exit', (code) => reject(new Error(`${p.name} exited (${code}) before listening:\n${p.out.slice(-3000)}`)));
    });
    p.url = line.url;
    this.listenMs.push(line.listen_ms);
    // AGENTVM_CHAOS_LOG_DIR keeps each process's log (nights, and a failure to look into).
    const logDir = process.env.AGENTVM_CHAOS_LOG_DIR;
    const n = this.listenMs.length;
    if (logDir) proc.once('exit', () => void writeFile(path.join(logDir, `${p.name}-${n}.log`), p.out));
  }

  /** kill -9, and wait until the process is gone. */
  async kill9(p: Proc): Promise<void> {
    const proc = p.proc!;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    // Listening never waits for re-adoption: the order of the two lines shows it whatever the machine's speed.
    const adopted = p.out.indexOf('re-adopted running VMs');
    assert.ok(adopted === -1 || p.out.indexOf('agentvm is listening') < adopted, `${p.name} listened only after re-adopting VMs; ${this.where()}`);
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await gone;
    this.kills.push(p.name);
  }

  down(p: Proc): boolean {
    return !p.proc || p.proc.exitCode !== null || p.proc.signalCode !== null;
  }

  async stopAll(): Promise<void> {
    for (const p of this.procs) {
      if (this.down(p)) continue;
      const gone = new Promise((r) => p.proc!.once('exit', r));
      p.proc!.kill('SIGTERM');
      await gone;
    }
  }

  log(): string {
    return this.procs.map((p) => `--- ${p.name}\n${p.out.slice(-3000)}`).join('\n');
  }

  /** Every line the processes logged that names this id (a snapshot's, a VM's). */
  linesOf(id: string): string {
    return this.procs.flatMap((p) => `${p.earlier ?? ''}\n${p.out}`.split('\n').filter((l) => l.includes(id)).map((l) => `${p.name}: ${l.slice(0, 1000)}`)).join('\n');
  }

  /** The last errors the processes logged (an answer 500 says no more than `internal`). */
  errors(): string {
    return this.procs.flatMap((p) => p.out.split('\n').filter((l) => l.includes('"level":50')).slice(-5).map((l) => `${p.name}: ${l.slice(0, 2000)}`)).join('\n');
  }

  /** One request; a connection the kill cut answers null. Every 5xx but a 503 with Retry-After is recorded. */
  async call(method: string, p: string, body?: object, headers: Record<string, string> = {}, key = this.key, ms = 120_000): Promise<Answer | null> {
    let res: Response;
    try {
      res = await fetch(`${this.api.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(ms),
      });
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') this.timeouts.push(`${method} ${p} after ${ms} ms`);
      return null;
    }
    const text = await res.text().catch(() => null);
    if (text === null) return null;
    const retryAfter = res.headers.get('retry-after');
    if (res.status >= 500 && !(res.status === 503 && retryAfter)) this.serverErrors.push(`${method} ${p} → ${res.status} ${text}`);
    return { status: res.status, body: text ? JSON.parse(text) : undefined, retryAfter };
  }

  async setUp(): Promise<void> {
    const admin = async (method: string, p: string, body: object) => (await this.call(method, p, body, {}, ADMIN))!;
    const t = await admin('POST', '/v1/admin/tenants', { email: `chaos-${randomBase62(8).toLowerCase()}@example.com` });
    this.tenantId = t.body.tenant_id;
    this.key = t.body.api_key;
    await admin('PUT', `/v1/admin/tenants/${this.tenantId}/card`, { brand: 'visa', last4: '4242' });
    await admin('POST', `/v1/admin/tenants/${this.tenantId}/credits`, { amount_cents: 100_000 });
  }

  /** A money POST (create or fork) with its Idempotency-Key; answers the VM id when it got a 201. */
  async moneyCall(m: MoneyCall): Promise<void> {
    const res = await this.call('POST', m.path, m.body, { 'idempotency-key': m.key });
    if (!res) {
      m.lost = true;
      return;
    }
    m.lost = false;
    // Refused, nothing charged, nothing made: no room or a template still capturing (503), or a fork
    // of a template whose capture a kill interrupted (400). A branch of a VM that is not running (now,
    // or gone: 409, 404), a start of a snapshot deleted or failed (404, 409).
    if (res.status === 503 || (res.status === 400 && m.path.includes('/fork'))) return;
    if ((res.status === 409 || res.status === 404) && /\/branch$|^\/v1\/api\/snapshots\//.test(m.path)) return;
    assert.equal(res.status, 201, `${m.path} with key ${m.key}: ${JSON.stringify(res.body)}; ${this.where()}${res.status >= 500 ? `\n${this.errors()}` : ''}`);
    const ids: string[] = res.body.vm_ids ?? [res.body.vm_id];
    m.answers.push(ids.join(','));
    // A VM made from a snapshot has the persist disk of its instant: its runs count on from there.
    for (const id of ids) if (!this.vms.has(id)) this.vms.set(id, { desired: 'running', persistRuns: 0, tier: m.tier });
  }

  /** A branch of a running VM with its Idempotency-Key (money like a create): one VM, or two of the spot tier. */
  branchCall(round: number, i: number, vmId: string, roll = this.rng.next()): MoneyCall {
    const two = roll < 0.4;
    const m: MoneyCall = {
      key: `chaos-${SEED}-${round}-${i}-branch`,
      path: `/v1/api/vms/${vmId}/branch`,
      body: two ? { count: 2, tier: 'spot' } : {},
      answers: [],
      lost: false,
      tier: two || this.vms.get(vmId)!.tier,
    };
    this.money.push(m);
    return m;
  }

  /** A snapshot of a VM (no key: a lost one is not asked again; the restart fails it, or it was made). */
  async snapshot(vmId: string): Promise<void> {
    // Waited for longer than the replica waits for its host's take (150 s, remoteSnapshots.ts): a
    // call this test gave up on would leave a take going on beyond the test's last look.
    const res = await this.call('POST', `/v1/api/vms/${vmId}/snapshots`, { name: `chaos ${vmId}` }, {}, this.key, 200_000);
    if (res && res.status !== 201) this.snapshotRefusals.push(`${res.status} ${res.body?.message ?? ''}`);
    if (!res || [409, 404, 503].includes(res.status)) return;
    assert.equal(res.status, 201, `snapshot of ${vmId}: ${JSON.stringify(res.body)}; ${this.where()}`);
    this.snapshots.push(res.body.snapshot_id);
  }

  /** VMs started from a snapshot, with an Idempotency-Key (money like a create). */
  startCall(round: number, i: number, snapshotId: string): MoneyCall {
    const m: MoneyCall = { key: `chaos-${SEED}-${round}-${i}-start`, path: `/v1/api/snapshots/${snapshotId}/vms`, body: {}, answers: [], lost: false, tier: false };
    this.money.push(m);
    return m;
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    const res = await this.call('DELETE', `/v1/api/snapshots/${snapshotId}`);
    // 409 while a VM starts from it; 404 when a lost delete was done.
    if (!res || [409, 404].includes(res.status)) return;
    assert.equal(res.status, 200, `delete of ${snapshotId}: ${JSON.stringify(res.body)}; ${this.where()}`);
    this.snapshots.splice(this.snapshots.indexOf(snapshotId), 1);
  }

  lifecycle(vmId: string, op: LifecycleOp, retryOfLost = false): Promise<void> {
    const next = (this.lifecycleChains.get(vmId) ?? Promise.resolve()).then(() => this.lifecycleNow(vmId, op, retryOfLost));
    this.lifecycleChains.set(vmId, next.catch(() => undefined));
    return next;
  }

  private async lifecycleNow(vmId: string, op: LifecycleOp, retryOfLost: boolean): Promise<void> {
    if (op === 'destroy') this.destroySent.add(vmId);
    const res = op === 'destroy' ? await this.call('DELETE', `/v1/api/vms/${vmId}`) : await this.call('POST', `/v1/api/vms/${vmId}/${op}`);
    if (!res) {
      this.lostLifecycle.push({ vmId, op });
      return;
    }
    const vm = this.vms.get(vmId)!;
    if (res.status === 404 && (vm.desired === 'deleted' || (op !== 'destroy' && this.destroySent.has(vmId)))) return;
    // A destroy whose answer a kill cut may have been committed before the kill: its retry finds no VM.
    if (res.status === 404 && retryOfLost && op === 'destroy') {
      vm.desired = 'deleted';
      return;
    }
    assert.equal(res.status, 200, `${op} ${vmId}: ${JSON.stringify(res.body)}; ${this.where()}`);
    vm.desired = op === 'destroy' ? 'deleted' : op === 'stop' ? 'stopped' : 'running';
  }

  /** An echo run: its persist_runs is at least one more than the last one answered. */
  async echo(vmId: string): Promise<void> {
    const res = await this.call('POST', `/v1/api/vms/${vmId}/run`, { task: 'chaos' });
    if (!res || res.status === 409 || res.status === 404) return; // cut, or the VM is not running (now)
    assert.equal(res.status, 200, `run on ${vmId}: ${JSON.stringify(res.body)}; ${this.where()}`);
    if (res.body.exit_code !== 0) return; // the guest went away under the run
    const { persist_runs } = JSON.parse(res.body.stdout);
    const vm = this.vms.get(vmId)!;
    assert.ok(persist_runs > vm.persistRuns, `persist_runs of ${vmId} went from ${vm.persistRuns} to ${persist_runs}; ${this.where()}`);
    vm.persistRuns = persist_runs;
  }

  /** An echo run queued and left: its end is looked at after the last round. */
  async echoAsync(vmId: string): Promise<void> {
    const res = await this.call('POST', `/v1/api/vms/${vmId}/run`, { task: 'chaos async' }, { prefer: 'respond-async' });
    if (!res || res.status === 409 || res.status === 404) return;
    assert.equal(res.status, 202, `async run on ${vmId}: ${JSON.stringify(res.body)}; ${this.where()}`);
    this.asyncRuns.push({ vmId, runId: res.body.run_id });
  }

  /**
   * Every run queued during the chaos has ended (none stays queued or running for ever), and one that
   * succeeded has its whole output. A destroyed VM's runs are gone with it.
   */
  async checkRuns(): Promise<void> {
    const ended: string[] = [];
    for (const { vmId, runId } of this.asyncRuns) {
      const run = await until(`run ${runId} ends`, async () => {
        const res = await this.call('GET', `/v1/api/vms/${vmId}/runs/${runId}`);
        if (res?.status === 404 && this.vms.get(vmId)!.desired === 'deleted') return { status: 'deleted' };
        return res?.status === 200 && !['queued', 'running'].includes(res.body.status) && res.body;
      }, 120_000).catch((err) => {
        throw new Error(`${err.message}; ${this.where()}\n${this.log()}`);
      });
      if (run.status === 'succeeded') assert.equal(JSON.parse(run.stdout).task, 'chaos async', `${runId}; ${this.where()}`);
      else assert.ok(['lost', 'deleted'].includes(run.status), `run ${runId} ended ${run.status}; ${this.where()}`);
      ended.push(run.status);
    }
    process.stderr.write(`chaos: ${ended.length} runs queued during the kills ended: ${ended.join(' ') || 'none'}\n`);
  }

  async capture(vmId: string): Promise<void> {
    const res = await this.call('POST', `/v1/api/vms/${vmId}/capture`, { visibility: 'private' });
    if (res?.status === 201) this.templates.push(res.body.template_id);
  }

  live(): string[] {
    return [...this.vms].filter(([, v]) => v.desired !== 'deleted').map(([id]) => id);
  }

  newMoneyCall(round: number, i: number): MoneyCall {
    const { rng } = this;
    const fork = this.templates.length > 0 && rng.next() < 0.3;
    const tier = !fork && rng.next() < 0.25;
    const m: MoneyCall = {
      key: `chaos-${SEED}-${round}-${i}`,
      path: fork ? `/v1/api/templates/${rng.pick(this.templates)}/fork` : '/v1/api/vms',
      body: fork ? {} : tier ? { harness: 'echo', tier: 'ondemand' } : { harness: 'echo' },
      answers: [],
      lost: false,
      tier,
    };
    this.money.push(m);
    return m;
  }

  /** One random operation of a round. */
  operation(round: number, i: number): Promise<void> {
    const { rng } = this;
    const live = this.live();
    // Each round's first operation branches a running VM or snapshots one (and starts a VM of a
    // snapshot), so that kills land in the middle of them.
    if (i === 0 && live.length < 6) return this.branchOrSnapshot(round, i);
    const roll = rng.next();
    if (live.length < 2 || (roll < 0.25 && live.length < 6)) return this.moneyCall(this.newMoneyCall(round, i));
    const vmId = rng.pick(live);
    if (roll < 0.5) return this.lifecycle(vmId, rng.pick<LifecycleOp>(['stop', 'start', 'restart', 'reprovision', 'reprovision']));
    if (roll < 0.6) return this.echo(vmId);
    if (roll < 0.68) return this.echoAsync(vmId);
    if (roll < 0.74) return this.capture(vmId);
    if (roll < 0.8 && live.length < 6) return this.moneyCall(this.branchCall(round, i, vmId));
    if (roll < 0.86) return this.snapshot(vmId);
    if (roll < 0.9 && this.snapshots.length && live.length < 6) return this.moneyCall(this.startCall(round, i, rng.pick(this.snapshots)));
    if (roll < 0.92 && this.snapshots.length) return this.deleteSnapshot(rng.pick(this.snapshots));
    return this.lifecycle(vmId, 'destroy');
  }

  /** A branch (odd rounds) or a snapshot and a start of one (even rounds) of a VM running now. */
  async branchOrSnapshot(round: number, i: number): Promise<void> {
    // Drawn before the first await, so that a seed replays the same draws.
    const [which, roll, snapAt] = [this.rng.next(), this.rng.next(), this.rng.next()];
    const listed = await this.call('GET', '/v1/api/vms');
    const up = ((listed?.body?.data ?? []) as Array<{ vm_id: string; status: string }>).filter((v) => v.status === 'running' && this.vms.get(v.vm_id)?.desired === 'running');
    if (!up.length) return;
    const vmId = up[Math.floor(which * up.length)].vm_id;
    if (round % 2) return this.moneyCall(this.branchCall(round, i, vmId, roll));
    // A VM of the round's other operations may be stopping: asked again of another running one, twice at most.
    for (let tries = 0, had = this.snapshots.length; tries < 3 && this.snapshots.length === had; tries++) {
      const now = tries === 0 ? vmId : ((await this.call('GET', '/v1/api/vms'))?.body?.data ?? []).find((v: { vm_id: string; status: string }) => v.status === 'running' && this.vms.get(v.vm_id)?.desired === 'running')?.vm_id;
      if (!now) break;
      await this.snapshot(now);
    }
    if (this.snapshots.length) await this.moneyCall(this.startCall(round, i, this.snapshots[Math.floor(snapAt * this.snapshots.length)]));
  }

  /** After a restart: lost money calls again with their keys, lost lifecycle calls again. */
  async retryLost(): Promise<void> {
    for (const m of this.money.filter((x) => x.lost)) {
      await until(`the retry of ${m.key} is answered`, async () => {
        await this.moneyCall(m);
        return !m.lost;
      }, 60_000);
    }
    for (const l of this.lostLifecycle.splice(0)) {
      if (this.vms.get(l.vmId)!.desired !== 'deleted') await this.lifecycle(l.vmId, l.op, true);
    }
  }

  /** A round: bring back what the last one killed, retry what was lost, random operations at once, kill -9 at a random moment. */
  async round(round: number): Promise<void> {
    for (const p of this.procs) if (this.down(p)) await this.start(p);
    await this.retryLost();
    const { rng } = this;
    const ops = 3 + rng.int(4);
    const killAfter = 100 + rng.int(2400);
    const victim = rng.pick(this.procs);
    const running = Array.from({ length: ops }, (_, i) =>
      new Promise((r) => setTimeout(r, rng.int(400))).then(() => this.operation(round, i)),
    );
    await new Promise((r) => setTimeout(r, killAfter));
    await this.kill9(victim);
    await Promise.all(running);
  }
}

interface Proc {
  name: string;
  args: string[];
  dir: string;
  env: Record<string, string>;
  proc?: ChildProcess;
  out: string;
  /** The lines of its earlier runs that name a snapshot (linesOf). */
  earlier?: string;
  url?: string;
}

const INTERNAL = `avm_internal_${randomBase62(32)}`;
const pgUrl = process.env.AGENTVM_TEST_DATABASE_URL;

/** The forms: one server on each database; API replica and two VM hosts on PostgreSQL (any of them killed). */
const forms: Array<{ name: string; backend: 'pglite' | 'postgres'; scaleOut: boolean }> = [{ name: 'one server, PGlite', backend: 'pglite', scaleOut: false }];
if (pgUrl) {
  forms.push({ name: 'one server, PostgreSQL', backend: 'postgres', scaleOut: false });
  forms.push({ name: 'an API replica and two hosts, PostgreSQL', backend: 'postgres', scaleOut: true });
}

/** A database of its own on the PostgreSQL server, dropped by the cleanup it registers. */
async function freshPostgres(cleanups: Array<() => Promise<void>>): Promise<string> {
  const name = `agentvm_chaos_${randomBase62(10).toLowerCase()}`;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  cleanups.push(async () => {
    const c = new pg.Client({ connectionString: pgUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  });
  const u = new URL(pgUrl!);
  u.pathname = `/${name}`;
  return u.toString();
}

for (const form of forms) {
  describe(`chaos: kill -9 during random operations (${form.name})`, { skip }, () => {
    const cleanups: Array<() => Promise<void>> = [];
    after(async () => {
      for (const c of cleanups.reverse()) await c().catch(() => undefined);
    });

    test(`${ROUNDS} rounds keep every invariant`, { timeout: 40 * 60_000 }, async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-chaos-'));
      cleanups.push(async () => {
        await killQemusUnder(dataDir);
        await rm(dataDir, { recursive: true, force: true });
      });
      const dbUrl = form.backend === 'postgres' ? await freshPostgres(cleanups) : undefined;
      const env = {
        AGENTVM_ADMIN_TOKEN: ADMIN,
        AGENTVM_IMAGE_DIR: imageDir!,
        AGENTVM_IMAGE_BUILD: 'off',
        AGENTVM_METER_INTERVAL_S: '1',
        AGENTVM_LOG_LEVEL: 'info',
        ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
        ...(form.scaleOut ? { AGENTVM_INTERNAL_TOKEN: INTERNAL, AGENTVM_TEMPLATE_DIR: path.join(dataDir, 'templates'), AGENTVM_HOST_STALE_S: '3' } : {}),
      };
      const proc = (name: string, args: string[]): Proc => ({ name, args, dir: path.join(dataDir, name), env, out: '' });
      const chaos = new Chaos(
        form.scaleOut ? [proc('api', ['serve', '--role', 'api']), proc('host1', ['host']), proc('host2', ['host'])] : [proc('server', ['serve'])],
      );
      const hosts = form.scaleOut ? chaos.procs.slice(1) : chaos.procs;
      cleanups.push(() => chaos.stopAll());
      process.stderr.write(`chaos (${form.name}): ${chaos.where()}\n`);

      // A VM and a template to fork from, before the kills begin.
      for (const h of hosts) await seedSnapshots(h.dir);
      for (const p of chaos.procs) await chaos.start(p);
      await until('a VM host is ready', async () => (await fetch(`${chaos.api.url}/readyz`)).status === 200);
      await chaos.setUp();
      const first = chaos.newMoneyCall(0, 0);
      await chaos.moneyCall(first);
      const seedVm = first.answers[0];
      await until('the first VM runs', async () => (await chaos.call('GET', `/v1/api/vms/${seedVm}`))?.body.status === 'running');
      await chaos.echo(seedVm);
      await chaos.capture(seedVm);
      await until('the first template is ready', async () => (await chaos.call('GET', `/v1/api/templates/${chaos.templates[0]}`))?.body.status === 'ready');

      for (let r = 1; r <= ROUNDS; r++) await chaos.round(r);

      // The last start: everything lost is asked again, then every VM must reach what was asked of it.
      for (const p of chaos.procs) if (chaos.down(p)) await chaos.start(p);
      await chaos.retryLost();
      const settled = await until(
        'every VM reaches its desired state',
        async () => {
          const list = (await chaos.call('GET', '/v1/api/vms'))!.body.data as Array<{ vm_id: string; status: string; status_reason: string | null }>;
          const byId = new Map(list.map((v) => [v.vm_id, v]));
          for (const [id, vm] of chaos.vms) {
            const seen = byId.get(id);
            if ((seen?.status ?? 'deleted') !== vm.desired || seen?.status_reason === 'host_unavailable') return false;
          }
          return list;
        },
        300_000,
      ).catch((err) => {
        throw new Error(`${err.message}: ${JSON.stringify([...chaos.vms])}; ${chaos.where()}\n${chaos.log()}`);
      });
      const running = settled.filter((v) => v.status === 'running').map((v) => v.vm_id);
      for (const id of running) await chaos.echo(id);
      await chaos.checkRuns();

      // One VM per Idempotency-Key: every answer for a key names the same VM, and the tenant has no other.
      for (const m of chaos.money) {
        assert.equal(new Set(m.answers).size <= 1, true, `key ${m.key} answered ${m.answers.join(', ')}; ${chaos.where()}`);
      }
      const made = new Set(chaos.money.flatMap((m) => m.answers.flatMap((a) => a.split(','))));
      // QEMU processes equal running VMs; no VM directory without a VM. A VM that took a standby VM
      // is a link to the standby's directory; the other standby directories (sb_*) are the host's
      // standbys, at most AGENTVM_STANDBY_VMS (2) of them, each with its QEMU, and nothing else runs.
      let qemus = 0;
      const live = new Set(chaos.live());
      // A destroyed VM leaves the API's list when its destroy is committed; its host removes its
      // directory afterwards, on its reconciler's next pass.
      await until(
        'the hosts remove the directories of destroyed VMs',
        async () => {
          for (const h of hosts) {
            const names = await readdir(path.join(h.dir, 'vms')).catch(() => [] as string[]);
            if (names.some((n) => !n.startsWith('sb_') && !live.has(n))) return false;
          }
          return true;
        },
        120_000,
      ).catch(() => undefined); // the assertion below names what is left
      for (const h of hosts) {
        const vmsDir = path.join(h.dir, 'vms');
        const names = await readdir(vmsDir).catch(() => [] as string[]);
        const taken = new Set<string>();
        let vmQemus = 0;
        for (const d of names.filter((n) => !n.startsWith('sb_'))) {
          assert.ok(live.has(d), `the directory of ${d} on ${h.name} outlived its VM; ${chaos.where()}`);
          // A next top left by a freeze is the disk's second name (branch.ts), never a file of its own.
          for (const n of (await readdir(path.join(vmsDir, d))).filter((x) => /\.next-/.test(x))) {
            const disk = `${n.split('.')[0]}.qcow2`;
            const [a, b] = await Promise.all([stat(path.join(vmsDir, d, n)), stat(path.join(vmsDir, d, disk))]);
            assert.equal(a.ino, b.ino, `a freeze of ${d}'s ${disk} was left half done (${n}); ${chaos.where()}`);
          }
          vmQemus += (await qemuPidsUnder(`${path.join(vmsDir, d)}${path.sep}`)).length;
          const target = await readlink(path.join(vmsDir, d)).catch(() => null);
          if (target) taken.add(target);
        }
        const standbys = names.filter((n) => n.startsWith('sb_') && !taken.has(n));
        assert.ok(standbys.length <= 2, `${standbys.length} standby VMs on ${h.name}; ${chaos.where()}`);
        let standbyQemus = 0;
        for (const d of standbys) standbyQemus += (await qemuPidsUnder(`${path.join(vmsDir, d)}${path.sep}`)).length;
        assert.equal((await qemuPidsUnder(`${vmsDir}${path.sep}`)).length, vmQemus + standbyQemus, `a QEMU of no VM and no standby on ${h.name}; ${chaos.where()}`);
        qemus += vmQemus;
      }
      assert.equal(qemus, running.length, `${qemus} QEMU processes for ${running.length} running VMs; ${chaos.where()}`);
      assert.deepEqual(chaos.serverErrors, [], `server errors; ${chaos.where()}`);

      await chaos.stopAll();
      const db: Db = await openDb(dbUrl ? { databaseUrl: dbUrl } : { pgliteDir: path.join(chaos.api.dir, 'db') });
      try {
        const rows = await db.query<{ vm_id: string; tier: string | null; created_at: Date }>(
          'SELECT vm_id, tier, created_at FROM vms WHERE tenant_id = $1',
          [chaos.tenantId],
        );
        assert.deepEqual(new Set(rows.map((r) => r.vm_id)), made, `the tenant's VMs are exactly those the keys answered; ${chaos.where()}`);
        // Ledger: one card charge per plan VM (created or forked); draws never beyond running time.
        const charges = await db.query<{ vm_id: string; n: number }>(
          `SELECT vm_id, count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND kind = 'card_charge' GROUP BY vm_id`,
          [chaos.tenantId],
        );
        const charged = new Map(charges.map((c) => [c.vm_id, c.n]));
        const now = Date.now();
        for (const vm of rows) {
          if (!vm.tier) {
            assert.equal(charged.get(vm.vm_id), 1, `${vm.vm_id} charged ${charged.get(vm.vm_id) ?? 0} times; ${chaos.where()}`);
            continue;
          }
          const [{ drawn }] = await db.query<{ drawn: number }>(
            `SELECT coalesce(sum(amount_cents), 0)::int AS drawn FROM ledger WHERE vm_id = $1 AND kind = 'credit_draw'`,
            [vm.vm_id],
          );
          const lived = now - new Date(vm.created_at).getTime();
          const most = Math.ceil((TIERS.ondemand.cents_per_hour * lived) / 3_600_000) + 1;
          assert.ok(drawn <= most, `${vm.vm_id} drew ${drawn} cents in ${lived} ms of life (at most ${most}); ${chaos.where()}`);
        }
        assert.equal(charges.length, rows.filter((r) => !r.tier).length, `a charge without a plan VM; ${chaos.where()}`);
        // Snapshots (branches' among them): whole and checked on their host, or failed with a reason
        // and nothing of them kept; none is left being made, and every one answered 201 is kept.
        const snaps = await db.query<{ snapshot_id: string; kind: string; status: string; status_reason: string | null; deleted_at: Date | null }>(
          'SELECT snapshot_id, kind, status, status_reason, deleted_at FROM snapshots WHERE tenant_id = $1',
          [chaos.tenantId],
        );
        const onDisk = new Map<string, string>();
        for (const h of hosts) {
          for (const name of await readdir(path.join(h.dir, 'vm-snapshots')).catch(() => [] as string[])) onDisk.set(name, path.join(h.dir, 'vm-snapshots', name));
        }
        const kept = snaps.filter((x) => x.status === 'ready' && !x.deleted_at && x.kind === 'snapshot');
        for (const x of snaps) {
          assert.notEqual(x.status, 'creating', `snapshot ${x.snapshot_id} is still being made; ${chaos.where()}\n${chaos.linesOf(x.snapshot_id)}`);
          if (x.status === 'failed') assert.ok(x.status_reason, `snapshot ${x.snapshot_id} failed with no reason; ${chaos.where()}`);
        }
        assert.deepEqual([...onDisk.keys()].sort(), kept.map((x) => x.snapshot_id).sort(), `the hosts keep exactly the snapshots kept; ${chaos.where()}`);
        for (const x of kept) assert.equal(await checkSnapshot(onDisk.get(x.snapshot_id)!), null, `snapshot ${x.snapshot_id} is damaged; ${chaos.where()}`);
        for (const id of chaos.snapshots) assert.ok(kept.some((x) => x.snapshot_id === id), `snapshot ${id} was answered 201 and is gone; ${chaos.where()}`);
      } finally {
        await db.close();
      }
      // Listening never waits for the VMs: each process's own figure from its start, on this machine.
      const worst = Math.max(...chaos.listenMs);
      process.stderr.write(
        `chaos (${form.name}): ${ROUNDS} rounds, kills ${chaos.kills.join(' ')}, ${chaos.money.length} money calls (branches ${chaos.money.filter((m) => m.path.endsWith('/branch')).length}, starts of snapshots ${chaos.money.filter((m) => m.path.startsWith('/v1/api/snapshots/')).length}), ${made.size} VMs, ${chaos.snapshots.length} snapshots kept (refused: ${chaos.snapshotRefusals.join('; ') || 'none'}), calls given up: ${chaos.timeouts.join('; ') || 'none'}, ` +
          `${running.length} running at the end; listen after start: max ${worst} ms, all ${chaos.listenMs.join(' ')} ms; ${chaos.where()}\n`,
      );
      assert.ok(worst < 10_000, `a restart took ${worst} ms to listen; ${chaos.where()}`);
    });
  });
}
