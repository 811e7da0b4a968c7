/**
 * Real microVMs, few and meaningful: the whole lifecycle through the API of a real server, a QEMU
 * killed under it, and the server itself killed while a VM is provisioning. Needs QEMU and a built
 * guest image: `npm run test:all` builds it into a cache outside the checkout and sets
 * AGENTVM_TEST_IMAGE_DIR.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, type Config } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { openDb } from '../src/store/db.ts';
import { detached, killQemusUnder, qemuPidsUnder, rawRun, seedSnapshots, until } from './helpers.ts';
import { BROKERED_PLACEHOLDER } from '../src/harness/invoke.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

function client(base: string, key: string) {
  return async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };
}

describe('real microVMs', { skip }, () => {
  let dataDir: string;
  let server: RunningServer;
  let api: ReturnType<typeof client>;
  let admin: ReturnType<typeof client>;
  const logs: string[] = [];

  let config: Config;
  let apiKey: string;

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-vm-'));
    process.env.AGENTVM_ADMIN_TOKEN = 'avm_admin_test_token_0123456789abcdefghijkl';
    // Standbys are made whatever the load: the suite runs another test file beside this one.
    config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir!, standbyIdleShare: 0 };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    const sink = new Writable({ write: (c, _e, cb) => (logs.push(c.toString()), cb()) });
    await seedSnapshots(dataDir);
    server = await startServer(config, createLogger('info', sink));
    await server.host.imageReady;
    admin = client(server.url, config.adminToken!);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'real@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    apiKey = tenant.body.api_key;
    api = client(server.url, apiKey);
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  /** What the server said of snapshots and standbys (warnings and worse): for a failure's message. */
  const driverLog = () => logs.filter((l) => /"level":(40|50|60)/.test(l) && /snapshot|standby/i.test(l)).map((l) => l.slice(0, 600)).join('\n');
  const exec = (vmId: string, argv: string[]) => server.host.driver!.exec(vmId, { argv }, 30_000);
  const status = async (vmId: string) => (await api('GET', `/v1/api/vms/${vmId}`)).body;
  const runningVm = (vmId: string) => until(`${vmId} running`, async () => {
    const vm = await status(vmId);
    if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
    return vm.status === 'running' && server.host.driver!.isRunning(vmId) && vm;
  });

  test('standby VMs: a new VM takes one with its own identity; stop and start, a restarted server, destroy', { timeout: 10 * 60_000 }, async () => {
    await server.host.prewarmed;
    await until('two standby VMs', async () => server.host.driver!.standbyCount() >= 2, 180_000).catch((err) => {
      throw new Error(`${err.message}\n${driverLog()}`);
    });
    const vms: string[] = [];
    for (let i = 0; i < 2; i++) vms.push((await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id);
    const seen = new Map<string, Set<string>>();
    for (const vmId of vms) {
      const vm = await runningVm(vmId);
      assert.equal(server.host.driver!.startedFrom(vmId), 'standby', `${vmId} took a standby`);
      // The standby range of network slots: 10.224.0.0/11.
      assert.match(vm.ipv4, /^10\.(22[4-9]|2[34]\d|25[0-5])\.\d+\.15$/);
      const r = await exec(vmId, ['sh', '-c', 'hostname; cat /etc/machine-id /run/agentvm/instance; ip -4 -o addr show label lo:0; od -An -N16 -tx1 /dev/urandom; date +%s; cat /proc/sys/kernel/random/boot_id; grep -c " /persist " /proc/mounts; ls -A /persist/home /var/tmp']);
      assert.equal(r.exit_code, 0, r.stderr);
      const [hostname, machineId, instance, addr, random, date, bootId, persistMounts, ...files] = r.stdout.trim().split('\n');
      assert.equal(server.host.driver!.facts(vmId)!.boot_id, bootId, "the host has the guest's boot id");
      assert.equal(hostname, vmId.replace(/_/g, '-').toLowerCase());
      assert.equal(machineId, createHash('sha256').update(`agentvm machine ${vmId}`).digest('hex').slice(0, 32));
      assert.equal(instance, server.host.driver!.facts(vmId)!.instance_id);
      assert.match(addr, new RegExp(`inet ${vm.ipv4.replace(/\./g, '\\.')}/32`));
      assert.ok(Math.abs(Number(date) - Date.now() / 1000) < 60, `guest clock ${date} is the host's`);
      assert.equal(persistMounts, '1');
      // The standby's warm-up run left nothing behind.
      assert.deepEqual(files.filter((f) => f && !f.endsWith(':')), []);
      for (const [k, v] of Object.entries({ machineId, instance, random, addr, bootId })) {
        if (!seen.has(k)) seen.set(k, new Set());
        seen.get(k)!.add(v);
      }
      // Its first run is its first: the counters on both disks start at one.
      const run = await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'first' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.deepEqual(JSON.parse(run.body.stdout), { task: 'first', hostname, kernel: JSON.parse(run.body.stdout).kernel, persist_runs: 1, rootfs_runs: 1 });
    }
    for (const [k, values] of seen) assert.equal(values.size, 2, `${k} differs between the VMs`);

    // Stop and start: the same address (the VM kept the standby's slot) and persist disk.
    const [vmId, other] = vms;
    const { ipv4 } = await status(vmId);
    await exec(vmId, ['sh', '-c', 'echo kept > /persist/keep.txt && sync']);
    await api('POST', `/v1/api/vms/${vmId}/stop`);
    await until('stopped', async () => (await status(vmId)).status === 'stopped');
    assert.deepEqual(await qemuPidsUnder(path.join(dataDir, 'vms', vmId)), []);
    await api('POST', `/v1/api/vms/${vmId}/start`);
    const started = await runningVm(vmId);
    assert.equal(started.ipv4, ipv4);
    assert.equal((await exec(vmId, ['cat', '/persist/keep.txt'])).stdout, 'kept\n');
    // A start after a stop is a new boot: a boot id of its own (a suspend's resume keeps it).
    const bootAfter = (await exec(vmId, ['cat', '/proc/sys/kernel/random/boot_id'])).stdout.trim();
    assert.ok(bootAfter && !seen.get('bootId')!.has(bootAfter), `a new boot id after stop and start (${bootAfter})`);

    // A new server process adopts the VM that is still a standby's QEMU, by its VM's name.
    const pid = server.host.driver!.pidOf(other);
    await server.close();
    server = await startServer(config, createLogger('info', new Writable({ write: (c, _e, cb) => (logs.push(c.toString()), cb()) })));
    api = client(server.url, apiKey);
    admin = client(server.url, config.adminToken!);
    await runningVm(other);
    assert.equal(server.host.driver!.pidOf(other), pid, 'the same QEMU');
    assert.equal((await exec(other, ['hostname'])).stdout.trim(), other.replace(/_/g, '-').toLowerCase());

    // Destroy: the VM's link, the standby's directory and its QEMU are gone.
    const standbyDir = await realpath(path.join(dataDir, 'vms', other));
    assert.match(path.basename(standbyDir), /^sb_/);
    for (const id of vms) await api('DELETE', `/v1/api/vms/${id}`);
    await until('disks removed', async () => !existsSync(path.join(dataDir, 'vms', other)) && !existsSync(standbyDir), 20_000);
    assert.deepEqual(await qemuPidsUnder(standbyDir), []);
  });

  test('snapshot clones: each VM its own identity, disks and randomness; a broken snapshot falls back to a cold boot', { timeout: 10 * 60_000 }, async () => {
    const driver = server.host.driver!;
    await server.host.prewarmed; // the starter shape's golden VM, made when the image was ready
    const other = await admin('POST', '/v1/admin/tenants', { email: 'clones@example.com' });
    await admin('PUT', `/v1/admin/tenants/${other.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const api = client(server.url, other.body.api_key);
    const status = async (vmId: string) => (await api('GET', `/v1/api/vms/${vmId}`)).body;
    const runningVm = (vmId: string) => until(`${vmId} running`, async () => {
      const vm = await status(vmId);
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running' && driver.isRunning(vmId) && vm;
    });
    // Clones of the golden VM itself: no standby to take meanwhile (the standby test is below).
    const standbyShape = driver.keptStandbyShape();
    driver.keepStandby(null);
    const vms: string[] = [];
    for (let i = 0; i < 2; i++) vms.push((await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id);
    const seen = new Map<string, Set<string>>();
    for (const vmId of vms) {
      const vm = await runningVm(vmId);
      assert.equal(driver.startedFrom(vmId), 'snapshot', `${vmId} resumed from the snapshot\n${driverLog()}`);
      const r = await exec(vmId, ['sh', '-c', 'hostname; cat /etc/machine-id /run/agentvm/instance; ip -4 -o addr show label lo:0; od -An -N16 -tx1 /dev/urandom; date +%s; findmnt -no SOURCE /persist; cat /proc/sys/kernel/random/boot_id; touch /persist/w /w']);
      assert.equal(r.exit_code, 0, r.stderr);
      const [hostname, machineId, instance, addr, random, date, persistDev, bootId] = r.stdout.trim().split('\n');
      assert.equal(hostname, vmId.replace(/_/g, '-').toLowerCase());
      assert.match(addr, new RegExp(`inet ${vm.ipv4.replace(/\./g, '\\.')}/32`));
      assert.ok(Math.abs(Number(date) - Date.now() / 1000) < 60, `guest clock ${date} is the host's`);
      assert.match(persistDev, /^\/dev\/sd/);
      for (const [k, v] of Object.entries({ machineId, instance, random, addr, bootId })) {
        if (!seen.has(k)) seen.set(k, new Set());
        seen.get(k)!.add(v);
      }
    }
    for (const [k, values] of seen) assert.equal(values.size, 2, `${k} differs between clones`);
    // Under TCG a QEMU counts the guest code it translated (the lifecycle bench reads it); under KVM
    // nothing is translated. A VM not running here has no count.
    const translated = await driver.translated(vms[1]);
    if (driver.opts.accel === 'tcg') assert.ok(translated && translated.blocks > 1000 && translated.codeBytes > translated.blocks, JSON.stringify(translated));
    else assert.equal(translated, null);
    assert.equal(await driver.translated('vm_notrunninghere'), null);
    // Restart resumes again: a fresh root layer, the same persist disk.
    const vmId = vms[0];
    await api('POST', `/v1/api/vms/${vmId}/restart`);
    await until('restarted', async () => (await exec(vmId, ['sh', '-c', 'test -e /persist/w && ! test -e /w'])).exit_code === 0);
    assert.equal(driver.startedFrom(vmId), 'snapshot');

    // A snapshot whose state is damaged: the next VM boots cold, the snapshot is dropped and made again.
    const stateDir = path.join(dataDir, 'snapshots');
    const [key] = (await readdir(stateDir)).filter((n) => !n.endsWith('.work'));
    await writeFile(path.join(stateDir, key, 'state'), 'not a migration stream');
    const cold = (await api('POST', '/v1/api/vms', { harness: 'echo' })).body.vm_id as string;
    await runningVm(cold);
    assert.equal(driver.startedFrom(cold), 'cold');
    assert.ok(logs.some((l) => l.includes('resuming from the snapshot failed; booting cold') && l.includes(cold)));
    assert.equal(existsSync(path.join(stateDir, key)), false);
    for (const id of [...vms, cold]) await api('DELETE', `/v1/api/vms/${id}`);
    driver.keepStandby(standbyShape);
  });

  test('create (idempotent), run, restart, stop, start, reprovision, crash, destroy', { timeout: 15 * 60_000 }, async () => {
    const creates = await Promise.all(
      Array.from({ length: 20 }, () => api('POST', '/v1/api/vms', { harness: 'echo' }, { 'idempotency-key': 'real-once' })),
    );
    assert.deepEqual(new Set(creates.map((c) => c.status)), new Set([201]));
    const ids = new Set(creates.map((c) => c.body.vm_id));
    assert.equal(ids.size, 1);
    const vmId = creates[0].body.vm_id as string;
    assert.equal((await api('GET', '/v1/api/vms')).body.total, 1);

    const vm = await runningVm(vmId);
    assert.match(vm.ipv4, /^10\.\d+\.\d+\.15$/);
    assert.equal(vm.vcpus, 1);
    assert.equal(vm.memory_mib, 1024);
    const facts = server.host.driver!.facts(vmId)!;
    assert.equal(facts.persist.mounted, true);
    assert.equal(facts.ipv4, vm.ipv4);

    // A file on the persist disk and one on the root filesystem.
    const write = await exec(vmId, ['sh', '-c', 'echo kept > /persist/keep.txt && echo gone > /var/tmp/root-marker && cat /run/agentvm/instance']);
    assert.equal(write.exit_code, 0, write.stderr);
    const bootBefore = write.stdout.trim();
    assert.equal(bootBefore, facts.instance_id);

    // Restart: a fresh root, the same persist disk.
    const restarting = await api('POST', `/v1/api/vms/${vmId}/restart`);
    assert.equal(restarting.body.status, 'restarting');
    await until('a new boot', async () => {
      await runningVm(vmId);
      const r = await exec(vmId, ['cat', '/run/agentvm/instance']);
      return r.stdout.trim() !== bootBefore;
    });
    const after = await exec(vmId, ['sh', '-c', 'cat /persist/keep.txt; test -e /var/tmp/root-marker && echo root-kept || echo root-fresh']);
    assert.equal(after.stdout, 'kept\nroot-fresh\n');

    // Stop: no QEMU left; start: the persist disk and the root filesystem are as they were.
    await exec(vmId, ['sh', '-c', 'echo stays > /var/tmp/root-kept && sync']);
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/stop`)).body.status, 'stopping');
    await until('stopped', async () => (await status(vmId)).status === 'stopped');
    assert.deepEqual(await qemuPidsUnder(path.join(dataDir, 'vms', vmId)), []);
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/stop`)).status, 200); // a no-op
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/start`)).body.status, 'starting');
    await runningVm(vmId);
    assert.equal((await exec(vmId, ['cat', '/persist/keep.txt', '/var/tmp/root-kept'])).stdout, 'kept\nstays\n');

    // Reprovision: the guest is rebuilt from the current image, the persist disk stays.
    await exec(vmId, ['sh', '-c', 'echo again > /var/tmp/root-marker']);
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/reprovision`)).body.status, 'reprovisioning');
    await until('reprovisioned', async () => {
      const v = await runningVm(vmId);
      const r = await exec(vmId, ['sh', '-c', 'cat /etc/agentvm-image; cat /persist/keep.txt; test -e /var/tmp/root-marker || echo root-fresh']);
      return v && r.stdout === `${(await server.host.imageReady).id}\nkept\nroot-fresh\n`;
    });

    // kill -9 of the QEMU: the VM says so within seconds.
    const [pid] = await qemuPidsUnder(path.join(dataDir, 'vms', vmId));
    assert.ok(pid);
    process.kill(pid, 'SIGKILL');
    const failed = await until('failed', async () => {
      const v = await status(vmId);
      return v.status === 'failed' && v;
    }, 10_000);
    assert.match(failed.status_reason, /SIGKILL/);
    await api('POST', `/v1/api/vms/${vmId}/start`);
    await runningVm(vmId);

    // Destroy: gone from the API, disks removed, no process.
    const destroyed = await api('DELETE', `/v1/api/vms/${vmId}`);
    assert.equal(destroyed.status, 200);
    assert.equal(destroyed.body.status, 'deleted');
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).status, 404);
    await until('disks removed', async () => !existsSync(path.join(dataDir, 'vms', vmId)), 20_000);
    assert.deepEqual(await qemuPidsUnder(path.join(dataDir, 'vms', vmId)), []);

    const charges = await server.services.db.query<{ amount_cents: number }>(`SELECT amount_cents FROM ledger WHERE kind = 'card_charge' AND vm_id = $1`, [vmId]);
    assert.deepEqual(charges, [{ amount_cents: 1900 }]); // 20 concurrent creates with one key: one charge
  });
  test('echo runs: literal tasks, counters across restart and reprovision, secrets, run limits', { timeout: 15 * 60_000 }, async () => {
    const created = await api('POST', '/v1/api/vms', { harness: 'echo' });
    const vmId = created.body.vm_id as string;
    await runningVm(vmId);
    const image = await server.host.imageReady;
    const run = async (task: string, extra: object = {}) => api('POST', `/v1/api/vms/${vmId}/run`, { task, ...extra });

    const first = await run('hello');
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.exit_code, 0, first.body.stderr);
    assert.equal(first.body.harness, 'echo');
    assert.equal(first.body.timed_out, false);
    assert.deepEqual(JSON.parse(first.body.stdout), {
      task: 'hello',
      hostname: vmId.replace(/_/g, '-').toLowerCase(),
      kernel: image.manifest.kernel_release,
      persist_runs: 1,
      rootfs_runs: 1,
    });

    // Tasks reach the harness as one argument, literally.
    const nasty = [
      `$(touch /tmp/pwned); echo "double" 'single' \`tick\` | cat; && > /etc/passwd\nsecond line\ttab \\ end`,
      '--help -rf',
      'é 😀 ünïcödé',
      'x'.repeat(65_536),
    ];
    for (const task of nasty) {
      const r = await run(task);
      assert.equal(r.status, 200);
      assert.equal(JSON.parse(r.body.stdout).task, task);
    }
    assert.equal((await exec(vmId, ['sh', '-c', 'test -e /tmp/pwned && echo yes || echo no'])).stdout, 'no\n');
    assert.equal((await run('a\u0000b')).status, 400);
    assert.equal((await run('x'.repeat(65_537))).status, 400);
    assert.equal((await run('t', { provider: 'openai' })).status, 400);
    assert.equal(JSON.parse((await run('count')).body.stdout).persist_runs, 6);

    // Restart and reprovision: rootfs_runs starts again, persist_runs keeps counting.
    await api('POST', `/v1/api/vms/${vmId}/restart`);
    await until('restarted', async () => (await status(vmId)).status === 'restarting' ? false : runningVm(vmId));
    assert.deepEqual(JSON.parse((await run('after restart')).body.stdout).persist_runs, 7);
    assert.deepEqual(JSON.parse((await run('again')).body.stdout).rootfs_runs, 2);
    await api('POST', `/v1/api/vms/${vmId}/reprovision`);
    await until('reprovisioned', async () => (await status(vmId)).status === 'reprovisioning' ? false : runningVm(vmId));
    const afterRepro = JSON.parse((await run('after reprovision')).body.stdout);
    assert.equal(afterRepro.persist_runs, 9);
    assert.equal(afterRepro.rootfs_runs, 1);

    // Secrets: write-only, in the harness environment, nowhere else.
    const value = 'sk-ant-api03-SecretValueForTheTest0123456789';
    const set = await api('PUT', `/v1/api/vms/${vmId}/secrets`, { ANTHROPIC_API_KEY: value, OTHER_TOKEN: 'x' });
    assert.equal(set.status, 200);
    assert.deepEqual(set.body.secret_names, ['ANTHROPIC_API_KEY', 'OTHER_TOKEN']);
    assert.ok(!JSON.stringify((await api('GET', `/v1/api/vms/${vmId}`)).body).includes(value));
    const driver = server.host.driver!;
    const raw = (argv: string[], o?: { timeoutMs?: number; maxOutputBytes?: number }) => rawRun(server.services, server.host.executor!, vmId, argv, o);
    const envRun = await raw(['sh', '-c', 'printf %s "$ANTHROPIC_API_KEY"; id -u']);
    assert.equal(envRun.stdout, `${value}1000\n`);
    const file = await exec(vmId, ['stat', '-c', '%a %U', '/persist/.agentvm/secrets.json']);
    assert.equal(file.stdout, '600 root\n');
    const peek = await raw(['cat', '/persist/.agentvm/secrets.json']);
    assert.notEqual(peek.exit_code, 0);
    const removed = await api('PUT', `/v1/api/vms/${vmId}/secrets`, { OTHER_TOKEN: null });
    assert.deepEqual(removed.body.secret_names, ['ANTHROPIC_API_KEY']);
    const dump = await server.services.db.query('SELECT row_to_json(v)::text AS j FROM vms v');
    assert.ok(!JSON.stringify(dump).includes(value));
    assert.ok(!logs.join('').includes(value));

    // A run past its deadline: its whole process group dies.
    const slow = await raw(['sh', '-c', 'sleep 300 & sleep 300'], { timeoutMs: 1500 });
    assert.equal(slow.status, 'timed_out');
    assert.equal(slow.timed_out, true);
    assert.equal((await exec(vmId, ['sh', '-c', 'pgrep -c -x sleep || true'])).stdout.trim(), '0');
    assert.equal((await run('still answers')).status, 200);

    await api('POST', `/v1/api/vms/${vmId}/stop`);
    const stopped = await run('nobody home');
    assert.equal(stopped.status, 409);
    assert.equal(stopped.body.error, 'vm_not_running');
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });
  test('gemini-cli: in the image, and one headless run through the API against a stand-in on the guest\'s loopback', { timeout: 15 * 60_000 }, async () => {
    const image = await server.host.imageReady;
    const pinned = image.manifest.harnesses['gemini-cli'];
    assert.ok(pinned, JSON.stringify(image.manifest.unavailable));
    const created = await api('POST', '/v1/api/vms', { harness: 'gemini-cli' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const vmId = created.body.vm_id as string;
    await runningVm(vmId);
    const driver = server.host.driver!;
    assert.ok(driver.facts(vmId)!.harnesses.includes('gemini-cli'));

    // The pinned version is the one installed (read from its package, not by starting it: the run below starts it).
    const spec = pinned[0], name = spec.slice(0, spec.lastIndexOf('@'));
    const installed = await exec(vmId, ['cat', `/usr/local/lib/agentvm-harnesses/gemini-cli/node_modules/${name}/package.json`]);
    assert.equal(installed.exit_code, 0, installed.stderr);
    assert.equal(JSON.parse(installed.stdout).version, spec.slice(spec.lastIndexOf('@') + 1));

    // The stand-in runs in its own session, so that it outlives the exec that starts it.
    const standIn = await readFile(path.join(root, 'test/fixtures/gemini-stand-in.mjs'), 'utf8');
    const reply = 'stand-in reply 7f3a';
    const started = await exec(vmId, ['sh', '-c', detached('node --input-type=module -e "$1" 8917 /tmp/stand-in.log "$2" >/tmp/stand-in.err 2>&1'), 'sh', standIn, reply]);
    assert.equal(started.exit_code, 0, started.stderr);
    await until('the stand-in listens', async () => (await exec(vmId, ['grep', '-q', 'listening', '/tmp/stand-in.log'])).exit_code === 0, 60_000);

    // The key is brokered (kept by the platform for the egress gateway); the customer points the
    // harness at the stand-in with a secret of its own. The image's system settings make the run
    // headless: key auth, no folder-trust stop, no telemetry.
    const key = 'gemini-test-key-0123456789';
    const secrets = await api('PUT', `/v1/api/vms/${vmId}/secrets`, { GEMINI_API_KEY: key, GOOGLE_GEMINI_BASE_URL: 'http://127.0.0.1:8917' });
    assert.equal(secrets.status, 200, JSON.stringify(secrets.body));
    assert.deepEqual(secrets.body.brokered_secret_names, ['GEMINI_API_KEY']);
    const run = await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'Say hello.' });
    const log = (await exec(vmId, ['cat', '/tmp/stand-in.log', '/tmp/stand-in.err'])).stdout;
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.equal(run.body.exit_code, 0, `${run.body.stderr}\n${log}`);
    assert.equal(run.body.stdout.trim(), reply);
    const calls = log.split('\n').filter((l) => l.includes('"path"')).map((l) => JSON.parse(l));
    assert.ok(calls.some((c) => /:streamGenerateContent$/.test(c.path)), log);
    // Pointed anywhere but its gateway, the harness holds only the placeholder: the key never left the platform.
    assert.ok(calls.length > 0 && calls.every((c) => c.key === BROKERED_PLACEHOLDER), log);
    assert.ok(!log.includes(key), log);
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });
  test('capture, scrub and fork: a public template keeps ordinary files and no secret; a private one keeps all', { timeout: 15 * 60_000 }, async () => {
    const created = await api('POST', '/v1/api/vms', { harness: 'echo' });
    const vmId = created.body.vm_id as string;
    await runningVm(vmId);
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'one' })).status, 200);
    assert.equal((await api('PUT', `/v1/api/vms/${vmId}/secrets`, { ANTHROPIC_API_KEY: 'sk-ant-api03-PlantedSecretValue0123456789abcdef' })).status, 200);
    // One secret of every kind, as the harness user would leave them, and ordinary files beside them.
    const plant = [
      'set -e; cd /persist/home',
      'mkdir -p .ssh .claude .codex .gemini .local/share/opencode .aws .config/gcloud proj/.git /persist/workspace/app',
      'printf -- "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXk=\\n-----END OPENSSH PRIVATE KEY-----\\n" > .ssh/id_ed25519',
      'echo "ssh-ed25519 AAAA user@host" > .ssh/id_ed25519.pub',
      'echo \'{"claudeAiOauth":{"accessToken":"x"}}\' > .claude/.credentials.json',
      'echo \'{"OPENAI_API_KEY":"sk-proj-x"}\' > .codex/auth.json',
      'echo "{}" > .gemini/oauth_creds.json',
      'echo "{}" > .local/share/opencode/auth.json',
      'printf "[default]\\naws_access_key_id = AKIAABCDEFGHIJKLMNOP\\n" > .aws/credentials',
      'echo "{}" > .config/gcloud/application_default_credentials.json',
      'echo "https://user:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com" > .git-credentials',
      'echo "git push --token ghp_abcdefghijklmnopqrstuvwxyz0123456789" > .bash_history',
      'printf "[remote \\"origin\\"]\\n\\turl = https://bot:tok3n@git.example.com/r.git\\n" > proj/.git/config',
      'echo "DATABASE_URL=postgres://u:p@db/x" > /persist/workspace/app/.env',
      'echo "DATABASE_URL=" > /persist/workspace/app/.env.example',
      'printf "const key = \\"sk-ant-api03-AnotherPlantedKey0123456789abcdef\\";\\nconsole.log(1);\\n" > /persist/workspace/app/main.js',
      'echo "hello" > /persist/workspace/app/README.md',
      'chown -R 1000:1000 /persist/home /persist/workspace',
    ].join('; ');
    const planted = await exec(vmId, ['sh', '-c', plant]);
    assert.equal(planted.exit_code, 0, planted.stderr);

    const waitReady = (id: string) =>
      until(`${id} ready`, async () => {
        const t = (await api('GET', `/v1/api/templates/${id}`)).body;
        if (t.status === 'failed') {
          const [row] = await server.services.db.query<{ status_reason: string }>('SELECT status_reason FROM templates WHERE template_id = $1', [id]);
          throw new Error(`capture failed: ${row?.status_reason}`);
        }
        return t.status === 'ready' && t;
      });
    const pub = await api('POST', `/v1/api/vms/${vmId}/capture`, { visibility: 'public', name: 'Scrub Test Workspace' });
    assert.equal(pub.status, 201, JSON.stringify(pub.body));
    assert.equal(pub.body.status, 'capturing');
    assert.equal(pub.body.slug, 'scrub-test-workspace');
    const priv = await api('POST', `/v1/api/vms/${vmId}/capture`, { name: 'Scrub Test Workspace' });
    assert.equal(priv.body.slug, 'scrub-test-workspace-2');
    const pubReady = await waitReady(pub.body.template_id);
    await waitReady(priv.body.template_id);
    const report = pubReady.scrub_report;
    for (const p of ['home/.ssh/id_ed25519', 'home/.claude/.credentials.json', 'home/.codex/auth.json', 'home/.gemini/oauth_creds.json',
      'home/.local/share/opencode/auth.json', 'home/.aws/credentials', 'home/.config/gcloud/application_default_credentials.json',
      'home/.git-credentials', 'home/.bash_history', 'workspace/app/.env', '.agentvm/secrets.json']) {
      assert.ok(report.removed.includes(p), `${p} not in ${JSON.stringify(report.removed)}`);
    }
    assert.deepEqual(report.redacted.map((r: { path: string }) => r.path).sort(), ['home/proj/.git/config', 'workspace/app/main.js']);
    // The VM keeps running, its disk untouched.
    assert.equal((await exec(vmId, ['cat', '/persist/home/.aws/credentials'])).exit_code, 0);

    const check = 'cd /persist; for f in home/.ssh/id_ed25519 home/.claude/.credentials.json home/.codex/auth.json home/.aws/credentials home/.git-credentials home/.bash_history workspace/app/.env .agentvm/secrets.json; do test -e $f && echo "KEPT $f"; done; cat workspace/app/README.md workspace/app/main.js home/proj/.git/config; ls home/.ssh; test -e workspace/app/.env.example && echo example-kept; grep -rl "PlantedSecret\\|AnotherPlantedKey\\|AKIAABCDEF\\|ghp_abc\\|tok3n" /persist 2>/dev/null || true';
    const forkAndLook = async (templateId: string) => {
      const fork = await api('POST', `/v1/api/templates/${templateId}/fork`, {});
      assert.equal(fork.status, 201, JSON.stringify(fork.body));
      assert.equal(fork.body.template_id, templateId);
      await runningVm(fork.body.vm_id);
      const echo = JSON.parse((await api('POST', `/v1/api/vms/${fork.body.vm_id}/run`, { task: 'forked' })).body.stdout);
      const look = await exec(fork.body.vm_id, ['sh', '-c', check]);
      await api('DELETE', `/v1/api/vms/${fork.body.vm_id}`);
      return { echo, out: look.stdout };
    };
    const fromPublic = await forkAndLook(pub.body.template_id);
    assert.equal(fromPublic.echo.persist_runs, 2); // the template's run, then this one
    assert.doesNotMatch(fromPublic.out, /KEPT|PlantedSecret|AnotherPlantedKey|AKIAABCDEF|ghp_abc|tok3n/);
    assert.match(fromPublic.out, /hello\n/);
    assert.match(fromPublic.out, /\[REDACTED\]/);
    assert.match(fromPublic.out, /url = https:\/\/git\.example\.com/);
    assert.match(fromPublic.out, /id_ed25519\.pub/);
    assert.match(fromPublic.out, /example-kept/);
    const fromPrivate = await forkAndLook(priv.body.template_id);
    assert.match(fromPrivate.out, /KEPT home\/\.ssh\/id_ed25519/);
    assert.match(fromPrivate.out, /KEPT \.agentvm\/secrets\.json/);
    assert.match(fromPrivate.out, /AnotherPlantedKey/);

    const t = (await api('GET', `/v1/api/templates/${pub.body.template_id}`)).body;
    assert.equal(t.forks, 1);
    // A stopped VM captures too (its disk at rest).
    await api('POST', `/v1/api/vms/${vmId}/stop`);
    await until('stopped', async () => (await status(vmId)).status === 'stopped');
    const atRest = await api('POST', `/v1/api/vms/${vmId}/capture`, {});
    assert.equal(atRest.status, 201);
    assert.ok((await waitReady(atRest.body.template_id)).size_bytes > 0);
    await api('DELETE', `/v1/api/vms/${vmId}`);
  });
});

describe('a server killed while a VM is provisioning', { skip }, () => {
  let dataDir: string;
  let child: ChildProcess | undefined;
  const adminToken = 'avm_admin_test_token_killed_0123456789abcdef';

  async function freePort(): Promise<number> {
    return new Promise((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
  }

  async function serve(port: number): Promise<ChildProcess> {
    const proc = spawn(process.execPath, [path.join(root, 'bin/agentvm.js'), 'serve', '--port', String(port), '--data-dir', dataDir], {
      // No standby VMs: the VM is killed in the middle of its own start (standbys: the tests above and chaos.test.ts).
      // No snapshots: its start is a cold boot, as a first VM's is while its server still makes its golden VM.
      env: { ...process.env, AGENTVM_ADMIN_TOKEN: adminToken, AGENTVM_IMAGE_DIR: imageDir, AGENTVM_LOG_LEVEL: 'warn', DATABASE_URL: '', AGENTVM_STANDBY_VMS: '0', AGENTVM_SNAPSHOTS: 'off' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    await until('the server', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000);
    return proc;
  }

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-kill-'));
  });

  after(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child!.once('exit', r));
    }
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('after kill -9 and a new start the VM runs once, charged once, no orphan QEMU', { timeout: 10 * 60_000 }, async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    child = await serve(port);
    const admin = client(base, adminToken);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'killed@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const api = client(base, tenant.body.api_key);
    const created = await api('POST', '/v1/api/vms', { harness: 'echo' }, { 'idempotency-key': 'k1' });
    assert.equal(created.status, 201);
    const vmId = created.body.vm_id as string;
    // Kill the server as soon as its QEMU exists, before the guest has answered.
    await until('qemu started', async () => (await qemuPidsUnder(path.join(dataDir, 'vms', vmId))).length > 0, 30_000);
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).body.status, 'provisioning');
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));

    child = await serve(port);
    const retried = await api('POST', '/v1/api/vms', { harness: 'echo' }, { 'idempotency-key': 'k1' });
    assert.equal(retried.body.vm_id, vmId); // the client's retry after the crash is a replay
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running');
    const list = await api('GET', '/v1/api/vms');
    assert.equal(list.body.total, 1);
    assert.equal((await qemuPidsUnder(path.join(dataDir, 'vms', vmId))).length, 1);

    assert.equal((await api('DELETE', `/v1/api/vms/${vmId}`)).status, 200);
    await until('no qemu', async () => (await qemuPidsUnder(path.join(dataDir, 'vms'))).length === 0, 20_000);
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    const db = await openDb({ pgliteDir: path.join(dataDir, 'db') });
    try {
      const charges = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger WHERE kind = 'card_charge'`);
      assert.equal(charges[0].n, 1);
    } finally {
      await db.close();
    }
  });
});
