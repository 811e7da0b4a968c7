/**
 * The egress gateway with real microVMs: what a guest can and cannot reach. This file runs itself
 * again inside a network namespace with nothing but loopback (test/netns.ts); every host a VM may
 * reach is a stand-in on loopback, named by AGENTVM_EGRESS_HOSTS pins.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { HARNESS_USER } from '../src/wire/protocol.ts';
import { detached, killQemusUnder, seedSnapshots, until } from './helpers.ts';
import { inOwnNetns, netnsUnavailable, inOwnNetnsRun } from './netns.ts';
import { startProviderStandins, STANDIN_PROOF_PATH, type ProviderStandins } from './standins/providers.ts';
import { readFile } from 'node:fs/promises';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? netnsUnavailable() ?? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';

if (!inOwnNetns()) {
  test('egress from real VMs, inside a network namespace of its own', { skip, timeout: 30 * 60_000 }, inOwnNetnsRun(import.meta.url, 29));
} else {
  describe('a VM reaches only what its policy allows, through its gateway', () => {
    let dataDir: string;
    let server: RunningServer;
    let config: ReturnType<typeof loadConfig>;
    let api: (method: string, p: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any }>;
    let site: http.Server;
    let sitePort: number;
    let providers: ProviderStandins;
    const KEYS = { anthropic: 'sk-ant-api03-realkey-9f8e7d6c5b4a', openai: 'sk-proj-realkey-0a1b2c3d4e5f', google: 'AIzaSyRealKey-1234567890abcdef' };

    before(async () => {
      providers = await startProviderStandins({ keys: KEYS });
      // Providers by name, as in production; the names are pinned to the stand-ins on loopback.
      const named = (url: string, name: string) => url.replace('127.0.0.1', name);
      process.env.AGENTVM_PROVIDER_ANTHROPIC_URL = named(providers.anthropic.url, 'anthropic.test');
      process.env.AGENTVM_PROVIDER_OPENAI_URL = named(providers.openai.url, 'openai.test');
      process.env.AGENTVM_PROVIDER_GOOGLE_URL = named(providers.google.url, 'google.test');
      site = http.createServer((req, res) => {
        if (req.url !== '/slow') return res.end('hello from allowed.test');
        // The first part at once, then nothing: a request in the middle of its answer (a model's stream).
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part one\n');
      });
      await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
      sitePort = (site.address() as AddressInfo).port;
      dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-egress-'));
      process.env.AGENTVM_ADMIN_TOKEN = 'avm_admin_test_token_0123456789abcdefghijkl';
      process.env.AGENTVM_EGRESS_HOSTS = 'allowed.test=127.0.0.1,pinned.test=127.0.0.1,anthropic.test=127.0.0.1,openai.test=127.0.0.1,google.test=127.0.0.1';
      config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
      delete process.env.AGENTVM_ADMIN_TOKEN;
      await seedSnapshots(dataDir);
      server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
      await server.host.imageReady;
      const admin = async (method: string, p: string, body?: unknown) =>
        (await fetch(`${server.url}${p}`, { method, headers: { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
      const tenant = await admin('POST', '/v1/admin/tenants', { email: 'egress@example.com' });
      await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
      api = async (method, p, body, headers = {}) => {
        const res = await fetch(`${server.url}${p}`, {
          method,
          headers: { authorization: `Bearer ${tenant.api_key}`, ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: await res.json() };
      };
    });

    after(async () => {
      await server?.close({ stopVms: true });
      await killQemusUnder(dataDir);
      await rm(dataDir, { recursive: true, force: true });
      site?.close();
      await providers?.close();
    });

    type Probe = { ms: number; status?: string; body?: string; err?: string };
    /**
     * What a program in the guest gets, as the harness user, for each [how, target] in turn: through the
     * proxy (CONNECT), straight, or a name lookup. One program for the lot (Node starts slowly in a VM).
     */
    const probes = async (vmId: string, list: ['proxy' | 'direct' | 'dns', string][]): Promise<Probe[]> => {
      const script = `
        const net = require('net'), dns = require('dns');
        const one = (how, target) => new Promise((resolve) => {
          const t0 = Date.now();
          let over = false;
          const done = (o) => { if (!over) { over = true; clearTimeout(timer); resolve({ ms: Date.now() - t0, ...o }); } };
          const timer = setTimeout(() => done({ err: 'hang' }), 20000);
          if (how === 'dns') dns.lookup(target, (err, a) => done(err ? { err: err.code } : { body: a }));
          else if (how === 'direct') {
            const i = target.lastIndexOf(':');
            const s = net.connect(Number(target.slice(i + 1)), target.slice(0, i), () => { done({ status: 'connected' }); s.destroy(); });
            s.on('error', (e) => done({ err: e.code }));
          } else {
            const s = net.connect(3128, 'gateway.agentvm.internal', () => s.write('CONNECT ' + target + ' HTTP/1.1\\r\\nhost: ' + target + '\\r\\n\\r\\n'));
            let b = '', open = false;
            s.on('data', (d) => {
              b += d;
              if (!open && b.includes('\\r\\n\\r\\n')) {
                if (b.slice(9, 12) !== '200') { done({ status: b.slice(9, 12), body: b.split('\\r\\n\\r\\n')[1] }); return s.destroy(); }
                open = true; b = '';
                s.write('GET / HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n');
              }
            });
            s.on('end', () => done({ status: '200', body: b }));
            s.on('error', (e) => done({ err: e.code }));
          }
        });
        (async () => {
          const list = JSON.parse(process.argv[1]);
          for (const [how, target] of list) console.log(JSON.stringify(await one(how, target)));
          process.exit(0);
        })();`;
      const r = await server.host.driver!.exec(vmId, { argv: ['node', '-e', script, JSON.stringify(list)], uid: HARNESS_USER.uid, gid: HARNESS_USER.gid }, 60_000 + 20_000 * list.length);
      assert.equal(r.exit_code, 0, r.stderr);
      const lines = r.stdout.trim().split('\n');
      assert.equal(lines.length, list.length, r.stdout);
      return lines.map((l) => JSON.parse(l));
    };
    const probe = async (vmId: string, how: 'proxy' | 'direct' | 'dns', target: string): Promise<Probe> => (await probes(vmId, [[how, target]]))[0];

    const running = (vmId: string) =>
      until(`${vmId} running`, async () => {
        const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
        if (vm.status === 'failed') throw new Error(vm.status_reason);
        return vm.status === 'running' && server.host.driver!.isRunning(vmId) && vm;
      });

    /** Suspended with its memory, then started again: resumed from what was saved. */
    const suspendAndStart = async (vmId: string) => {
      assert.equal((await api('POST', `/v1/api/vms/${vmId}/suspend`)).status, 200);
      await until('suspended', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'suspended', 120_000);
      assert.equal((await api('POST', `/v1/api/vms/${vmId}/start`)).status, 200);
      await running(vmId);
      assert.equal(server.host.driver!.startedFrom(vmId), 'suspended', 'resumed with its memory: its processes go on');
    };

    test('refused at once (a refusal, never a hang) and logged: the host, private ranges, metadata, another VM, a pinned name not allowed', { timeout: 20 * 60_000 }, async () => {
      const a = await api('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'allowlist', allow: ['allowed.test'] } });
      assert.equal(a.status, 201, JSON.stringify(a.body));
      const b = await api('POST', '/v1/api/vms', { harness: 'echo' });
      const vm = await running(a.body.vm_id);
      const other = await running(b.body.vm_id);
      assert.deepEqual(vm.egress, { mode: 'allowlist', allow: ['allowed.test'] });
      assert.deepEqual(other.egress, { mode: 'allowlist', allow: [] }, "echo's default reaches nothing");
      const apiPort = new URL(server.url).port;
      const hostGateway = vm.ipv4.replace(/\.15$/, '.2');

      const times: string[] = [];
      const refused = [`${hostGateway}:${apiPort}`, `127.0.0.1:${apiPort}`, '10.0.0.1:80', '169.254.169.254:80', `${other.ipv4}:22`, `pinned.test:${sitePort}`];
      // Not through the proxy: nothing is routed off the VM but the gateway, so it fails at once.
      const straight = [`${hostGateway}:${apiPort}`, '10.0.0.1:80', '169.254.169.254:80', `${other.ipv4}:22`, `127.0.0.1:${apiPort}`];
      const [ok, ...seen] = await probes(vm.vm_id, [
        ['proxy', `allowed.test:${sitePort}`],
        ...refused.map((t) => ['proxy', t] as ['proxy', string]),
        ...straight.map((t) => ['direct', t] as ['direct', string]),
        ['dns', 'allowed.test'],
      ]);
      assert.equal(ok.status, '200', JSON.stringify(ok));
      assert.match(ok.body!, /hello from allowed\.test/);
      refused.forEach((target, i) => {
        const r = seen[i];
        assert.equal(r.status, '403', `${target}: ${JSON.stringify(r)}`);
        assert.match(r.body!, /^agentvm egress policy denies /);
        times.push(`${target} ${r.ms} ms`);
      });
      straight.forEach((target, i) => {
        const r = seen[refused.length + i];
        // An error the network answers at once (no route, refused), not a connection left hanging;
        // how long the guest took to say so is the machine's speed, printed, not asserted.
        assert.ok(r.err && r.err !== 'hang', `${target} must fail at once, not connect or hang: ${JSON.stringify(r)}`);
        assert.match(r.err, /^(ENETUNREACH|EHOSTUNREACH|ECONNREFUSED)$/, `${target}: ${JSON.stringify(r)}`);
        times.push(`${target} direct ${r.ms} ms`);
      });
      const lookup = seen.at(-1)!;
      assert.ok(lookup.err && lookup.err !== 'hang', `a name resolves only at the gateway: ${JSON.stringify(lookup)}`);
      process.stderr.write(`egress refusals: ${times.join(', ')}; lookup ${lookup.ms} ms\n`);

      const log = (await api('GET', `/v1/api/vms/${vm.vm_id}/egress/log?limit=200`)).body;
      const denied = log.data.filter((e: { decision: string }) => e.decision === 'denied');
      assert.equal(denied.length, refused.length);
      assert.deepEqual(new Set(denied.map((e: { host: string; port: number }) => `${e.host}:${e.port}`)), new Set(refused));
      const allowed = log.data.find((e: { decision: string }) => e.decision === 'allowed');
      assert.equal(allowed.host, 'allowed.test');
      assert.ok(allowed.bytes_in > 0 && allowed.bytes_out > 0, JSON.stringify(allowed));

      // Removed from the policy: the very next connection is refused (the gateway reads the policy
      // on every connection), whatever the time between the change and it.
      assert.equal((await api('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { mode: 'allowlist', allow: [] })).status, 200);
      const gone = await probe(vm.vm_id, 'proxy', `allowed.test:${sitePort}`);
      assert.equal(gone.status, '403', JSON.stringify(gone));

      // A server restart (the VMs keep running): the new server's gateway serves the adopted VM.
      await api('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { mode: 'allowlist', allow: ['allowed.test'] });
      await server.close();
      server = await startServer({ ...config, port: Number(apiPort) }, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
      await server.started;
      assert.ok(server.host.driver!.isRunning(vm.vm_id), 'the VM was adopted, not booted again');
      const again = await probe(vm.vm_id, 'proxy', `allowed.test:${sitePort}`);
      assert.equal(again.status, '200', JSON.stringify(again));
      for (const id of [vm.vm_id, other.vm_id]) await api('DELETE', `/v1/api/vms/${id}`);
    });

    // The rest are VMs of their own, two at a time (the machine's cores): the server is not restarted again.
    describe('and with agents at work', { concurrency: 2 }, () => {
      // First: the slowest (a large program under emulation), so that the others run beside it.
      test('opencode completes a tool-using task through the gateway with its key brokered', { timeout: 15 * 60_000 }, async () => {
        const { result, exec } = await agentTask('opencode', 'ANTHROPIC_API_KEY', { model: 'anthropic/claude-sonnet-4-5' });
        assert.equal(result.body.exit_code, 0, result.body.stderr.slice(-3000));
        assert.equal((await exec(['cat', STANDIN_PROOF_PATH])).stdout, 'brokered-ok\n', `its shell tool ran: ${result.body.stdout.slice(-1500)} ${result.body.stderr.slice(-1500)}`);
      });

      test('a request through the gateway in the middle of a suspend ends with an error when the VM starts again, never a hang', { timeout: 10 * 60_000 }, async () => {
        const created = await api('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'allowlist', allow: ['allowed.test'] } });
        const vm = await running(created.body.vm_id);
        // A program of the harness user in the middle of a request: what it saw, and when, in a file.
        const script = `
          const net = require('net'), fs = require('fs'), t0 = Date.now();
          const log = (s) => fs.appendFileSync('/tmp/slow.log', (Date.now() - t0) + ' ' + s + '\\n');
          const s = net.connect(3128, 'gateway.agentvm.internal', () => s.write('GET http://allowed.test:${sitePort}/slow HTTP/1.1\\r\\nhost: allowed.test\\r\\n\\r\\n'));
          s.on('data', (d) => log(String(d).includes('part one') ? 'part one' : 'data'));
          s.on('end', () => { log('end'); process.exit(0); });
          s.on('error', (e) => { log('error ' + e.code); process.exit(0); });
          setTimeout(() => { log('hang'); process.exit(0); }, 600000);`;
        const exec = (argv: string[]) => server.host.driver!.exec(vm.vm_id, { argv, uid: HARNESS_USER.uid, gid: HARNESS_USER.gid }, 60_000);
        const started = await exec(['sh', '-c', detached('node -e "$0" >/dev/null 2>&1'), script]);
        assert.equal(started.exit_code, 0, started.stderr);
        const seen = async () => (await exec(['sh', '-c', 'cat /tmp/slow.log 2>/dev/null; true'])).stdout;
        await until('the first part of the answer', async () => (await seen()).includes('part one'), 120_000);

        await suspendAndStart(vm.vm_id);
        const t0 = Date.now();
        // Ended at the start (its other end went with the suspended QEMU): an error the program can act on.
        const log = await until('the request ends', async () => {
          const text = await seen();
          return /error|end|hang/.test(text) ? text : undefined;
        }, 120_000);
        assert.match(log, /error ECONN(ABORTED|RESET)/, log);
        process.stderr.write(`a request cut by a suspend ended ${Date.now() - t0} ms after the start was seen: ${log.trim().split('\n').at(-1)}\n`);
        // And the next one goes through.
        const again = await probe(vm.vm_id, 'proxy', `allowed.test:${sitePort}`);
        assert.equal(again.status, '200', JSON.stringify(again));
        await api('DELETE', `/v1/api/vms/${vm.vm_id}`);
      });

      /**
       * A real agent in a VM with its provider key brokered: the task runs a shell command through the
       * agent's tool and writes on the persist disk; the stand-in saw the real key; the guest never had
       * it (its processes' environments, the secrets file, and both disks read from the host after).
       */
      const agentTask = async (
        harness: string,
        secret: keyof typeof SECRET_OF,
        run: { model?: string; provider?: string } = {},
        /** What happens to the VM once the run is queued, before it is followed to its end. */
        meanwhile?: (vmId: string) => Promise<void>,
      ) => {
        const created = await api('POST', '/v1/api/vms', { harness });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const vm = await running(created.body.vm_id);
        const key = KEYS[SECRET_OF[secret]];
        const set = await api('PUT', `/v1/api/vms/${vm.vm_id}/secrets`, { [secret]: key, PLAIN_SECRET: 'plain-value' });
        assert.equal(set.status, 200, JSON.stringify(set.body));
        assert.deepEqual(set.body.secret_names, [secret, 'PLAIN_SECRET'].sort());
        assert.deepEqual(set.body.brokered_secret_names, [secret]);
        const seenBefore = providers.seen.length;
        // Queued and followed, not a synchronous run: an agent on a slow machine can take longer than a
        // client's wait for the answer's headers (Node's fetch gives up after 300 s).
        const queued = await api('POST', `/v1/api/vms/${vm.vm_id}/run`, { task: 'Write the proof file with your shell tool.', ...run }, { prefer: 'respond-async' });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        await meanwhile?.(vm.vm_id);
        const ended = await until(
          `the ${harness} run ends`,
          async () => {
            const r = await api('GET', `/v1/api/vms/${vm.vm_id}/runs/${queued.body.run_id}`);
            return r.body.finished_at ? r : undefined;
          },
          14 * 60_000,
        );
        const result = { status: ended.status, body: { ...ended.body, stdout: ended.body.stdout ?? '', stderr: ended.body.stderr ?? '' } };
        const seen = providers.seen.slice(seenBefore).filter((r) => r.provider === SECRET_OF[secret]);
        assert.equal(result.status, 200, JSON.stringify(result.body));
        assert.ok(seen.length > 0, `${harness} reached its stand-in: ${result.body.stderr?.slice(-2000)}`);
        assert.ok(seen.every((r) => r.credential === key), `every request carried the real key: ${JSON.stringify(seen.map((r) => [r.path, r.credentialFrom, r.credential?.slice(0, 12)]))}`);
        const exec = (argv: string[]) => server.host.driver!.exec(vm.vm_id, { argv }, 60_000);
        const guestView = await exec(['sh', '-c', `cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${key}'; cat /persist/.agentvm/secrets.json`]);
        assert.equal(guestView.stdout.split('\n')[0], '0', 'no process in the guest has the key in its environment');
        assert.ok(!guestView.stdout.includes(key), 'the guest secrets file does not hold the key');
        assert.match(guestView.stdout, /plain-value/, 'other secrets still reach the guest');
        return { vm, result, exec, key };
      };
      const SECRET_OF = { ANTHROPIC_API_KEY: 'anthropic', OPENAI_API_KEY: 'openai', GEMINI_API_KEY: 'google' } as const;

      /** The key is nowhere on the VM's disks, read from the host once the VM is stopped. */
      const notOnDisks = async (vmId: string, key: string) => {
        await api('POST', `/v1/api/vms/${vmId}/stop`);
        await until('stopped', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'stopped');
        for (const disk of ['upper.qcow2', 'persist.qcow2']) {
          const bytes = await readFile(path.join(dataDir, 'vms', vmId, disk));
          assert.equal(bytes.indexOf(key), -1, `the key is not on ${disk}`);
          assert.ok(bytes.length > 0, disk);
        }
      };

      test("claude-code completes a tool-using task through the gateway, suspended in the middle of its model's answer and started again; its key never enters the guest", { timeout: 15 * 60_000 }, async () => {
        // claude-code's first call to its model is answered in part and then nothing more (opencode,
        // at work meanwhile, talks to the same stand-in under another user-agent).
        const stalled = providers.stallNextCall(/^claude-cli\//);
        const { vm, result, exec, key } = await agentTask('claude-code', 'ANTHROPIC_API_KEY', {}, async (vmId) => {
          await stalled; // suspended in the middle of its model's answer: started again, it asks again
          await suspendAndStart(vmId);
        });
        assert.equal(result.body.exit_code, 0, result.body.stderr.slice(-3000));
        assert.match(result.body.stdout, /done/);
        assert.equal((await exec(['cat', STANDIN_PROOF_PATH])).stdout, 'brokered-ok\n', 'the Bash tool ran in the VM and wrote on the persist disk, after the start');
        await notOnDisks(vm.vm_id, key);
      });

      test('codex completes a tool-using task through the gateway, and its key never enters the guest', { timeout: 15 * 60_000 }, async () => {
        const { vm, result, exec, key } = await agentTask('codex', 'OPENAI_API_KEY');
        assert.equal(result.body.exit_code, 0, result.body.stderr.slice(-3000));
        const calls = providers.seen.filter((r) => r.provider === 'openai').map((r) => `${r.method} ${r.path} ${r.headers['content-type']} ${r.headers['content-encoding']} ${r.body === undefined ? 'no body' : Object.keys(r.body as object).join(',')}`);
        assert.equal((await exec(['cat', STANDIN_PROOF_PATH])).stdout, 'brokered-ok\n', `the shell tool ran in the VM and wrote on the persist disk: ${result.body.stdout.slice(-2000)} ${result.body.stderr.slice(-3000)} ${calls.join('\n')}`);
        await notOnDisks(vm.vm_id, key);
      });

      test('gemini-cli completes a tool-using task through the gateway with its key brokered', { timeout: 15 * 60_000 }, async () => {
        const { result, exec } = await agentTask('gemini-cli', 'GEMINI_API_KEY');
        assert.equal(result.body.exit_code, 0, result.body.stderr.slice(-3000));
        assert.equal((await exec(['cat', STANDIN_PROOF_PATH])).stdout, 'brokered-ok\n', `its shell tool ran: ${result.body.stdout.slice(-1500)} ${result.body.stderr.slice(-1500)}`);
      });
    });
  });
}
