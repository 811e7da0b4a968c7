/**
 * Attacks from inside a VM on its host, on real microVMs: a guest that opens hundreds of connections to
 * its gateway (each once a process on the host), and a QEMU taken over by its guest (what it could
 * read and write as the user it runs as). This file runs itself again inside a network namespace with
 * nothing but loopback (test/netns.ts), as the egress tests do.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { HARNESS_USER } from '../src/wire/protocol.ts';
import { apiClient, detached, killQemusUnder, seedSnapshots, until, type ApiCall } from './helpers.ts';
import { inOwnNetns, netnsUnavailable, inOwnNetnsRun } from './netns.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = !imageDir
  ? 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)'
  : process.getuid?.() !== 0
    ? 'QEMU runs as users of its own only under a server started as root'
    : (netnsUnavailable() ?? false);
const ADMIN = 'avm_admin_test_token_attacks_vm_0123456789';

/** Every process on the host: pid → [parent pid, command name, command line]. */
async function processes(): Promise<Map<number, [number, string, string]>> {
  const all = new Map<number, [number, string, string]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' ');
    all.set(Number(entry), [Number(stat.slice(close + 2).split(' ')[1]), stat.slice(stat.indexOf('(') + 1, close), cmdline]);
  }
  return all;
}

/** The processes descended from `pid`. */
function descendants(all: Map<number, [number, string, string]>, pid: number): number[] {
  const out: number[] = [];
  for (const [p, [ppid]] of all) {
    for (let up = ppid, n = 0; up > 1 && n < 64; up = all.get(up)?.[0] ?? 0, n++) {
      if (up === pid) {
        out.push(p);
        break;
      }
    }
  }
  return out;
}

/** A field of /proc/PID/status. */
async function statusField(pid: number, name: string): Promise<string> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  return new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(text)?.[1] ?? '';
}

if (!inOwnNetns()) {
  test('attacks from inside a VM on its host, inside a network namespace of its own', { skip, timeout: 30 * 60_000 }, inOwnNetnsRun(import.meta.url, 29));
} else {
  describe('a VM cannot reach into its host', () => {
    let dataDir: string;
    let server: RunningServer;
    let api: ApiCall;
    let site: http.Server;
    let sitePort: number;
    let vmId: string;
    let otherId: string;

    const untilRunning = (id: string) =>
      until(`${id} running`, async () => {
        const v = (await api('GET', `/v1/api/vms/${id}`)).body;
        if (v.status === 'failed') throw new Error(`failed: ${v.status_reason}`);
        return v.status === 'running' ? v : undefined;
      }, 10 * 60_000);
    const exec = (id: string, argv: string[], asAgent = true) =>
      server.host.driver!.exec(id, { argv, ...(asAgent ? { uid: HARNESS_USER.uid, gid: HARNESS_USER.gid } : {}) }, 120_000);

    before(async () => {
      site = http.createServer((_req, res) => res.end('hello from allowed.test'));
      await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
      sitePort = (site.address() as AddressInfo).port;
      dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-attacks-vm-'));
      process.env.AGENTVM_ADMIN_TOKEN = ADMIN;
      process.env.AGENTVM_EGRESS_HOSTS = 'allowed.test=127.0.0.1';
      await seedSnapshots(dataDir);
      const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
      delete process.env.AGENTVM_ADMIN_TOKEN;
      server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
      await server.host.imageReady;
      // A clone of the golden VM: its RAM is the snapshot's memory, copy-on-write.
      await server.host.prewarmed;
      const admin = apiClient(server.url, ADMIN);
      const tenant = (await admin('POST', '/v1/admin/tenants', { email: 'attacker@example.com' })).body;
      await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
      api = apiClient(server.url, tenant.api_key);
      const a = await api('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'allowlist', allow: ['allowed.test'] } });
      assert.equal(a.status, 201, JSON.stringify(a.body));
      const b = await api('POST', '/v1/api/vms', { harness: 'echo' });
      vmId = a.body.vm_id;
      otherId = b.body.vm_id;
      await untilRunning(vmId);
      await untilRunning(otherId);
    });

    after(async () => {
      await server?.close({ stopVms: true });
      await killQemusUnder(dataDir);
      await rm(dataDir, { recursive: true, force: true });
      site?.close();
    });

    test('300 connections from a guest to its gateway start no process on the host', { timeout: 12 * 60_000 }, async () => {
      const qemu = server.host.driver!.pidOf(vmId)!;
      assert.ok(qemu, 'the VM has a QEMU');
      // The guest opens 300 connections, 30 a second (within the gateway's rate), each a tunnel held open.
      const script = `
        const net = require('net'), fs = require('fs');
        let opened = 0, live = 0, closed = 0;
        const log = () => fs.writeFileSync('/tmp/conns', JSON.stringify({ opened, live, closed }));
        const one = () => {
          const s = net.connect(3128, 'gateway.agentvm.internal', () => s.write('CONNECT allowed.test:${sitePort} HTTP/1.1\\r\\nhost: allowed.test\\r\\n\\r\\n'));
          let seen = false;
          s.on('data', (d) => { if (!seen && String(d).startsWith('HTTP/1.1 200')) { seen = true; live++; log(); } });
          s.on('error', () => undefined);
          s.on('close', () => { closed++; if (seen) live--; log(); });
          opened++; log();
        };
        const timer = setInterval(() => { for (let i = 0; i < 3 && opened < 300; i++) one(); if (opened >= 300) clearInterval(timer); }, 100);
        setTimeout(() => process.exit(0), 900000);`;
      const started = await exec(vmId, ['sh', '-c', detached('node -e "$0" >/dev/null 2>&1'), script]);
      assert.equal(started.exit_code, 0, started.stderr);
      // The host's processes are looked at every second while the guest opens them (a process per
      // connection, as socat was, lives as long as its connection): the most seen at once under the
      // QEMU, or naming the VM's directory (QEMU's user network started socat through a double fork:
      // its parent was init, its command line named the VM's gateway socket).
      const vmDir = path.join(dataDir, 'vms', vmId);
      let counts = { opened: 0, live: 0, closed: 0 };
      let most: string[] = [];
      let lastRead = 0;
      const deadline = Date.now() + 10 * 60_000;
      while (!(counts.opened >= 300 && counts.live >= 50)) {
        assert.ok(Date.now() < deadline, `the guest's connections did not go through in time: ${JSON.stringify(counts)}`);
        const all = await processes();
        const naming = [...all].filter(([p, [, , cmd]]) => p !== qemu && cmd.includes(`${vmDir}/`)).map(([p]) => p);
        const under = [...new Set([...descendants(all, qemu), ...naming])].map((p) => `${p} ${all.get(p)![2].slice(0, 120)}`);
        if (under.length > most.length) most = under;
        if (Date.now() - lastRead > 10_000) {
          lastRead = Date.now();
          counts = JSON.parse((await exec(vmId, ['sh', '-c', 'cat /tmp/conns 2>/dev/null || echo {}'])).stdout || '{}');
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
      process.stderr.write(`300 gateway connections: ${counts.live} tunnels open, ${counts.closed} refused or closed when last read; most host processes seen under the QEMU at once ${most.length}\n`);
      assert.deepEqual(most, [], 'no process is started for a guest connection');
    });

    test("a VM's QEMU runs as a user of its own, in its seccomp sandbox, and reads nothing of the server's or another VM's", { timeout: 5 * 60_000 }, async () => {
      const qemu = server.host.driver!.pidOf(vmId)!;
      const other = server.host.driver!.pidOf(otherId)!;
      const [uid] = (await statusField(qemu, 'Uid')).split(/\s+/).map(Number);
      const [gid] = (await statusField(qemu, 'Gid')).split(/\s+/).map(Number);
      const [otherUid] = (await statusField(other, 'Uid')).split(/\s+/).map(Number);
      assert.notEqual(uid, 0, 'QEMU is not root');
      assert.notEqual(uid, otherUid, "each VM's QEMU is a user of its own");
      assert.equal(await statusField(qemu, 'Seccomp'), '2', 'a seccomp filter is on');
      assert.equal((await statusField(qemu, 'Groups')).trim(), '', 'no supplementary group');
      // What that user can open, tried by a process with the QEMU's own credentials.
      const as = (args: string[]) => spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...args], { encoding: 'utf8' });
      const secretsKey = path.join(dataDir, 'secrets.key');
      const otherDisk = path.join(dataDir, 'vms', otherId, 'persist.qcow2');
      // (The admin token is in the environment here, not in the data dir.)
      for (const file of [secretsKey, otherDisk, path.join(dataDir, 'db', 'PG_VERSION'), path.join(dataDir, 'host-id')]) {
        assert.ok(existsSync(file), file);
        const r = as(['head', '-c', '1', file]);
        assert.notEqual(r.status, 0, `QEMU's user must not read ${file}`);
        assert.match(r.stderr, /Permission denied/, file);
      }
      // Its own disks it can (else it could not run), and the image only read.
      assert.equal(as(['head', '-c', '1', path.join(dataDir, 'vms', vmId, 'persist.qcow2')]).status, 0, 'it reads its own disk');
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      const rootfs = path.join(imageDir!, vm.image_id ?? '', 'rootfs.ext4');
      assert.notEqual(as(['sh', '-c', `: >> '${rootfs}'`]).status, 0, 'the shared root filesystem is read-only to it');
      // Its RAM maps the golden memory through a sealed copy: not even root can write it through QEMU's descriptor.
      assert.match(await readlink(`/proc/${qemu}/fd/3`), /^\/memfd:agentvm:.*\/mem \(deleted\)$/);
      const fd = openSync(`/proc/${qemu}/fd/3`, 'r+');
      try {
        assert.throws(() => writeSync(fd, Buffer.from('x'), 0, 1, 0), /EPERM/);
      } finally {
        closeSync(fd);
      }
      for (const snap of await readdir(path.join(dataDir, 'snapshots'))) {
        assert.notEqual(as(['sh', '-c', `: >> '${path.join(dataDir, 'snapshots', snap, 'mem')}'`]).status, 0, 'the golden memory is not writable by it');
      }
    });
  });
}
