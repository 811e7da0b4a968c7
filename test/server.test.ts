import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, open, readFile, stat, rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { accelFor, chooseAccel, probeDriver } from '../src/vmm/probe.ts';
import { until } from './helpers.ts';

const run = promisify(execFile);
const BIN = path.resolve('bin/agentvm.js');
const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** Starts `agentvm serve` as a real process on a free loopback port and waits for its URL in the log. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<{ proc: ChildProcess; url: string; log: () => string }> {
  const proc = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, AGENTVM_IMAGE_BUILD: 'off', ...(process.env.AGENTVM_TEST_IMAGE_DIR ? { AGENTVM_IMAGE_DIR: process.env.AGENTVM_TEST_IMAGE_DIR } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 30_000);
    proc.stdout!.on('data', () => {
      const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.once('exit', (code) => reject(new Error(`server exited ${code}:\n${out}`)));
  });
  return { proc, url, log: () => out };
}

test('a newcomer: serve, create a tenant, card and credits with the admin CLI, then the API with the key; logs hold no secret; SIGTERM stops cleanly', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-test-'));
  dirs.push(dataDir);
  const { proc, url, log } = await serve(dataDir);
  try {
    const tokenFile = path.join(dataDir, 'admin-token');
    assert.equal((await stat(tokenFile)).mode & 0o777, 0o600);
    const adminToken = (await readFile(tokenFile, 'utf8')).trim();
    const env = { ...process.env, AGENTVM_BASE_URL: url, AGENTVM_ADMIN_TOKEN: adminToken };

    const created = JSON.parse((await run(process.execPath, [BIN, 'admin', 'tenants', 'create', '--email', 'new@example.com', '--json'], { env })).stdout);
    assert.match(created.tenant_id, /^ten_/);
    assert.match(created.api_key, /^avm_live_/);
    const card = JSON.parse((await run(process.execPath, [BIN, 'admin', 'card', 'set', '--tenant', created.tenant_id, '--brand', 'visa', '--last4', '4242', '--json'], { env })).stdout);
    assert.equal(card.card_on_file, true);
    const credits = JSON.parse((await run(process.execPath, [BIN, 'admin', 'credits', 'add', '--tenant', created.tenant_id, '--cents', '5000', '--json'], { env })).stdout);
    assert.deepEqual(credits, { balance_cents: 5000 });
    const bad = await run(process.execPath, [BIN, 'admin', 'tenants', 'create', '--email', 'x@example.com'], { env: { ...env, AGENTVM_ADMIN_TOKEN: 'wrong' } }).catch((e) => e);
    assert.equal(bad.code, 3);
    assert.match(bad.stderr, /unauthorized/);

    const auth = { authorization: `Bearer ${created.api_key}` };
    const whoami = await (await fetch(`${url}/v1/api/whoami`, { headers: auth })).json();
    assert.equal(whoami.email, 'new@example.com');
    const issued = await (await fetch(`${url}/v1/api/keys`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"label":"reader"}' })).json();
    const billing = await (await fetch(`${url}/v1/api/billing`, { headers: { authorization: `Bearer ${issued.key}` } })).json();
    assert.deepEqual(billing, { card_on_file: true, brand: 'visa', last4: '4242', credits_cents: 5000 });
    assert.equal((await fetch(`${url}/healthz`)).status, 200);

    const lines = log().trim().split('\n');
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    assert.ok(requests.length >= 6);
    for (const r of requests) {
      assert.match(r.req_id, /^req_/);
      assert.equal(typeof r.status, 'number');
      assert.equal(typeof r.ms, 'number');
    }
    // The card's digits as a value (a bare 4242 can turn up in a timestamp or a request id by chance).
    for (const secret of [created.api_key, issued.key, adminToken, '"4242"']) {
      assert.ok(!log().includes(secret), 'the log never holds a key, token or card number');
    }

    proc.kill('SIGTERM');
    const code = await new Promise((resolve) => proc.once('exit', resolve));
    assert.equal(code, 0);
    assert.match(log(), /agentvm stopped/);
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
  }

  // Restarted on the same data dir: the same admin token, the tenant and its key are still there.
  const again = await serve(dataDir);
  try {
    const whoami = await fetch(`${again.url}/v1/api/whoami`, { headers: { authorization: `Bearer ${(await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim()}` } });
    assert.equal(whoami.status, 401, 'the admin token never works on /v1/api');
    const second = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dataDir], { stdio: 'pipe', env: { ...process.env, AGENTVM_IMAGE_BUILD: 'off' } });
    let err = '';
    second.stderr.on('data', (d) => (err += d));
    const code = await new Promise((resolve) => second.once('exit', resolve));
    assert.notEqual(code, 0, 'a second server on the same embedded database is refused');
    assert.match(err, /another agentvm server/);
  } finally {
    again.proc.kill('SIGTERM');
    await new Promise((resolve) => again.proc.once('exit', resolve));
  }
});

test('the driver probe: KVM only with vmx/svm and an accessible /dev/kvm, else TCG, and the choice is named', async () => {
  const intel = 'processor\t: 0\nflags\t\t: fpu vme de pse tsc msr vmx ept\n';
  const amd = 'processor\t: 0\nflags\t\t: fpu vme svm npt\n';
  const pvm = 'processor\t: 0\nflags\t\t: fpu vme de pse tsc msr hypervisor\nvmx flags\t: none\n';
  assert.deepEqual(accelFor(intel, true), { accel: 'kvm', why: 'hardware virtualisation and /dev/kvm are available' });
  assert.equal(accelFor(amd, true).accel, 'kvm');
  assert.deepEqual(accelFor(intel, false), { accel: 'tcg', why: '/dev/kvm is not accessible' });
  // A paravirtualised /dev/kvm (PVM) is there, but the CPU flags carry no vmx/svm.
  assert.deepEqual(accelFor(pvm, true), { accel: 'tcg', why: 'the CPU shows no vmx/svm flag' });
  // This machine's choice, from its own CPU flags and whether /dev/kvm opens read-write.
  const kvmOpens = await open('/dev/kvm', 'r+').then(async (fh) => (await fh.close(), true), () => false);
  const here = accelFor(await readFile('/proc/cpuinfo', 'utf8'), kvmOpens);
  assert.deepEqual(await chooseAccel(), here);
  // QEMU is the first executable qemu-system-x86_64 on PATH (a file that is not executable is passed over); none: named.
  const bins = [await mkdtemp(path.join(tmpdir(), 'agentvm-path-')), await mkdtemp(path.join(tmpdir(), 'agentvm-path-'))];
  dirs.push(...bins);
  await writeFile(path.join(bins[0], 'qemu-system-x86_64'), '', { mode: 0o644 });
  await writeFile(path.join(bins[1], 'qemu-system-x86_64'), '#!/bin/sh\n', { mode: 0o755 });
  const savedPath = process.env.PATH;
  try {
    process.env.PATH = bins.join(path.delimiter);
    assert.deepEqual(await probeDriver(), { usable: true, accel: here.accel, qemu: path.join(bins[1], 'qemu-system-x86_64'), detail: `${here.accel}: ${here.why}` });
    process.env.PATH = bins[0];
    assert.deepEqual(await probeDriver(), { usable: false, accel: null, qemu: null, detail: 'qemu-system-x86_64 is not installed' });
  } finally {
    process.env.PATH = savedPath;
  }
});

/** A tenant with a card on the server at `url`, through the operator API; answers its readwrite key. */
async function tenantWithCard(url: string, dataDir: string): Promise<string> {
  const admin = { authorization: `Bearer ${(await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim()}`, 'content-type': 'application/json' };
  const t = await (await fetch(`${url}/v1/admin/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ email: `w${Date.now()}@example.com` }) })).json();
  await fetch(`${url}/v1/admin/tenants/${t.tenant_id}/card`, { method: 'PUT', headers: admin, body: '{"brand":"visa","last4":"4242"}' });
  return t.api_key;
}

/** The longest a /healthz answer took over `ms` of asking, one request after another. */
async function slowestHealthz(url: string, ms: number): Promise<number> {
  let worst = 0;
  for (const end = Date.now() + ms; Date.now() < end; ) {
    const t0 = Date.now();
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(res.status, 200);
    worst = Math.max(worst, Date.now() - t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  return worst;
}

const noQemu = probeDriver().then((p) => (p.usable ? false : 'needs qemu-system-x86_64'));

test('VMs waiting for a guest image that is not there never starve the server, and a kill -9 with a reprovision pending comes back at once', { skip: await noQemu }, async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-test-'));
  dirs.push(dataDir);
  // No image and no build: every VM waits for the image, as on a first start while it is being built.
  const env = { AGENTVM_IMAGE_DIR: path.join(dataDir, 'no-images'), AGENTVM_SNAPSHOTS: 'off' };
  const first = await serve(dataDir, env);
  let vmId: string;
  try {
    const key = await tenantWithCard(first.url, dataDir);
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${first.url}/v1/api/vms`, { method: 'POST', headers: auth, body: '{"harness":"echo"}' });
    assert.equal(created.status, 201);
    vmId = (await created.json()).vm_id;
    const reprovision = await fetch(`${first.url}/v1/api/vms/${vmId}/reprovision`, { method: 'POST', headers: auth });
    assert.equal(reprovision.status, 200);
    // A server that spun on the waiting VM answered nothing at all; one that waits answers at once.
    assert.ok((await slowestHealthz(first.url, 3000)) < 2000, 'the server keeps answering while VMs wait for the image');
    // The look for the image may still be under way on a busy machine: /readyz says so until it has ended.
    const ready = await until('the look for the guest image ended', async () => {
      const r = await fetch(`${first.url}/readyz`);
      const body = { status: r.status, ...(await r.json()) };
      return /looking for the guest image/.test(body.message ?? '') ? undefined : body;
    }, 60_000);
    assert.equal(ready.status, 503);
    assert.match(ready.message, /no guest image .* run `agentvm image build`/);
    const vm = await (await fetch(`${first.url}/v1/api/vms/${vmId}`, { headers: auth })).json();
    assert.equal(vm.status, 'reprovisioning', 'the VM waits for the image in the reconciler');
  } finally {
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
  }
  const t0 = Date.now();
  const again = await serve(dataDir, env);
  try {
    assert.ok(Date.now() - t0 < 15_000, 'the restarted server listens');
    assert.ok((await slowestHealthz(again.url, 2000)) < 2000, 'and keeps answering');
    assert.match(again.log(), /agentvm is listening/);
  } finally {
    again.proc.kill('SIGTERM');
    assert.equal(await new Promise((r) => again.proc.once('exit', r)), 0, 'SIGTERM stops it');
  }
});

test('without QEMU the server serves the API, /readyz names what to install, and a create is 503 with Retry-After', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-test-'));
  dirs.push(dataDir);
  // A PATH with no qemu-system-x86_64 on it: the machine of a newcomer who has not installed QEMU yet.
  const { proc, url, log } = await serve(dataDir, { PATH: dataDir });
  try {
    const ready = await fetch(`${url}/readyz`);
    assert.equal(ready.status, 503);
    const body = await ready.json();
    assert.match(body.message, /qemu-system-x86_64 is not installed/);
    assert.match(body.message, /scripts\/install-debs\.sh/);
    const key = await tenantWithCard(url, dataDir);
    const created = await fetch(`${url}/v1/api/vms`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(created.status, 503);
    assert.ok(Number(created.headers.get('retry-after')) > 0);
    const vms = await (await fetch(`${url}/v1/api/vms`, { headers: { authorization: `Bearer ${key}` } })).json();
    assert.equal(vms.total, 0, 'a refused create leaves no VM');
    assert.doesNotMatch(log(), /Unhandled|unhandled/);
  } finally {
    proc.kill('SIGTERM');
    assert.equal(await new Promise((r) => proc.once('exit', r)), 0);
  }
});
