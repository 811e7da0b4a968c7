/**
 * The customer CLI and the MCP server as a person and an agent use them: real processes against a
 * real server process. Login reads its code from where the server put it (its log, without SMTP).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { killQemusUnder, seedSnapshots, until } from './helpers.ts';

const run = promisify(execFile);
const BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../bin/agentvm.js');
const ADMIN = 'avm_admin_cli_test_0123456789abcdefghijklmno';
const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;

let server: ChildProcess;
let url: string;
let dataDir: string;
let configHome: string;
let logText = '';

async function cli(args: string[], env: Record<string, string> = {}, input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, AGENTVM_BASE_URL: url, XDG_CONFIG_HOME: configHome, AGENTVM_API_KEY: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

async function adminCall(method: string, p: string, body: unknown) {
  const res = await fetch(`${url}${p}`, { method, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
}

/** The newest login code the server logged for `email` after `since` characters of its log. */
async function codeFromLog(email: string, since: number): Promise<string> {
  for (let i = 0; i < 1200; i++) {
    const lines = logText.slice(since).split('\n').filter((l) => l.includes(email) && l.includes('login code'));
    const m = lines.length ? /login code is (\d{6})/.exec(lines[lines.length - 1]) : null;
    if (m) return m[1];
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no login code in the server log');
}

describe('the CLI and the MCP server against a real server', () => {
  let tenant: { tenant_id: string; api_key: string };

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-cli-'));
    configHome = await mkdtemp(path.join(os.tmpdir(), 'agentvm-cfg-'));
    if (imageDir) await seedSnapshots(dataDir);
    server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
      env: {
        ...process.env,
        AGENTVM_ADMIN_TOKEN: ADMIN,
        AGENTVM_IMAGE_BUILD: 'off',
        DATABASE_URL: '',
        ...(imageDir ? { AGENTVM_IMAGE_DIR: imageDir } : {}),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    server.stdout!.on('data', (c) => (logText += c));
    // Generous: under load (VMs of other tests) a start can take many times its usual second or two.
    for (let i = 0; i < 2400 && !url; i++) {
      const m = /"url":"(http:\/\/[^"]+)"/.exec(logText);
      if (m) url = m[1];
      else await new Promise((r) => setTimeout(r, 50));
    }
    tenant = await adminCall('POST', '/v1/admin/tenants', { email: 'cli-user@example.com' });
    await adminCall('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
  });

  after(async () => {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
    await killQemusUnder(dataDir); // a VM a failed test did not destroy
    await rm(dataDir, { recursive: true, force: true });
    await rm(configHome, { recursive: true, force: true });
  });

  test('login with the emailed code saves a 0600 key that works; a wrong code and a bad key fail with exit 3', async () => {
    const since = logText.length;
    const child = spawn(process.execPath, [BIN, 'login', '--email', 'cli-user@example.com'], {
      env: { ...process.env, AGENTVM_BASE_URL: url, XDG_CONFIG_HOME: configHome, AGENTVM_API_KEY: '' },
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stdin.write(`${await codeFromLog('cli-user@example.com', since)}\n`);
    const code = await new Promise((r) => child.on('close', r));
    assert.equal(code, 0, out);
    assert.match(out, /logged in as cli-user@example.com/);
    const file = path.join(configHome, 'agentvm', 'config.json');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const saved = JSON.parse(await readFile(file, 'utf8'));
    assert.match(saved.api_key, /^avm_live_/);

    const me = await cli(['whoami', '--json']);
    assert.equal(me.code, 0, me.stderr);
    assert.equal(JSON.parse(me.stdout).email, 'cli-user@example.com');
    assert.equal(JSON.parse(me.stdout).scope, 'readwrite');
    assert.match(JSON.parse(me.stdout).key_label, /^cli on /);

    // A wrong code: the one just sent with its last digit changed.
    const elsewhere = await mkdtemp(path.join(os.tmpdir(), 'agentvm-cfg-'));
    const before = logText.length;
    const wrongLogin = spawn(process.execPath, [BIN, 'login', '--email', 'cli-user@example.com'], {
      env: { ...process.env, AGENTVM_BASE_URL: url, XDG_CONFIG_HOME: elsewhere, AGENTVM_API_KEY: '' },
    });
    let wrongErr = '';
    wrongLogin.stderr.on('data', (c) => (wrongErr += c));
    const sent = await codeFromLog('cli-user@example.com', before);
    wrongLogin.stdin.write(`${sent.slice(0, 5)}${(Number(sent[5]) + 1) % 10}\n`);
    const wrongCode = await new Promise((r) => wrongLogin.on('close', r));
    await rm(elsewhere, { recursive: true, force: true });
    assert.equal(wrongCode, 3, wrongErr);
    assert.match(wrongErr, /^(code: )?error: unauthorized: the code is wrong/m);
    const bad = await cli(['whoami'], { AGENTVM_API_KEY: 'avm_live_notarealkeynotarealkeynotarealkey00' });
    assert.equal(bad.code, 3);
    assert.match(bad.stderr, /error: unauthorized\nhint: /);
  });

  test('every kind of failure has its exit code, with code, message and hint on stderr', async () => {
    const read = JSON.parse((await cli(['keys', 'issue', '--label', 'ci', '--json'])).stdout);
    assert.equal(read.scope, 'read');
    const readOnly = await cli(['vms', 'create'], { AGENTVM_API_KEY: read.key });
    assert.equal(readOnly.code, 3);
    assert.match(readOnly.stderr, /^error: read_only_key: /);
    assert.equal((await cli(['vms', 'get', 'vm_doesnotexist'])).code, 6);
    const invalid = await cli(['vms', 'create', '--plan', 'gold']);
    assert.equal(invalid.code, 4);
    assert.match(invalid.stderr, /plan/);
    const poor = await adminCall('POST', '/v1/admin/tenants', { email: 'no-card@example.com' });
    const payment = await cli(['vms', 'create'], { AGENTVM_API_KEY: poor.api_key });
    assert.equal(payment.code, 5);
    assert.match(payment.stderr, /^error: card_required: .*\nhint: /);
    const gone = await cli(['whoami'], { AGENTVM_BASE_URL: 'http://127.0.0.1:9' });
    assert.equal(gone.code, 7);
    assert.equal((await cli(['vms', 'frobnicate'])).code !== 0, true);
  });

  test('the operator CLI exits with the same codes as the customer CLI', async () => {
    const admin = (args: string[], token = ADMIN) => cli(['admin', ...args], { AGENTVM_ADMIN_TOKEN: token });
    const created = await admin(['tenants', 'create', '--email', 'admin-exit@example.com', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const badToken = await admin(['tenants', 'create', '--email', 'other@example.com'], 'avm_admin_notthetokennotthetokennotthetoken0');
    assert.equal(badToken.code, 3);
    assert.match(badToken.stderr, /^error: unauthorized: /);
    const missing = await admin(['card', 'set', '--tenant', 'ten_doesnotexist', '--brand', 'visa', '--last4', '4242']);
    assert.equal(missing.code, 6);
    assert.match(missing.stderr, /^error: not_found: /);
    const invalid = await admin(['card', 'set', '--tenant', JSON.parse(created.stdout).tenant_id, '--brand', 'Visa!', '--last4', '4242']);
    assert.equal(invalid.code, 4);
    const again = await admin(['tenants', 'create', '--email', 'admin-exit@example.com']);
    assert.equal(again.code, 8);
    assert.match(again.stderr, /^error: conflict: /);
    assert.equal((await cli(['admin', 'credits', 'add', '--tenant', 'ten_x', '--cents', '5'], { AGENTVM_ADMIN_TOKEN: ADMIN, AGENTVM_BASE_URL: 'http://127.0.0.1:9' })).code, 7);
  });

  test('reads print tables for people and JSON for scripts; help has examples; completion', async () => {
    const list = await cli(['harnesses', 'list']);
    assert.equal(list.code, 0);
    assert.match(list.stdout, /claude-code.*yes/);
    const json = JSON.parse((await cli(['harnesses', 'list', '--json'])).stdout);
    assert.equal(json.default, 'claude-code');
    // --json prints exactly what the API answers for the same call with the same key.
    const key = JSON.parse(await readFile(path.join(configHome, 'agentvm', 'config.json'), 'utf8')).api_key;
    const api = async (p: string) => (await fetch(`${url}${p}`, { headers: { authorization: `Bearer ${key}` } })).json();
    for (const [args, p] of [
      [['billing', '--json'], '/v1/api/billing'],
      [['usage', '--json'], '/v1/api/usage'],
      [['templates', 'list', '--json'], '/v1/api/templates'],
      [['keys', 'list', '--json'], '/v1/api/keys'],
      [['vms', 'list', '--json'], '/v1/api/vms'],
    ] as const) {
      const r = await cli([...args]);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      // last_used_at moves when a key is used (at most every 10 s): not part of what is compared.
      const stable = (body: { data?: Array<Record<string, unknown>> }) => JSON.stringify(body, (k, v) => (k === 'last_used_at' ? undefined : v));
      assert.equal(stable(JSON.parse(r.stdout)), stable(await api(p)), args.join(' '));
    }
    for (const args of [['vms', 'create'], ['vms', 'run'], ['templates', 'fork'], ['keys', 'issue'], ['login'], ['billing']]) {
      const help = await cli([...args, '--help']);
      assert.match(help.stdout, /Example/, args.join(' '));
    }
    const completion = await cli(['completion', 'bash']);
    assert.match(completion.stdout, /complete -F _agentvm agentvm/);
    assert.match(completion.stdout, /"vms"\) words="[^"]*create/);
  });

  test('a reader that goes before the output ends (`| head`) ends the command quietly, exit 141 as SIGPIPE would', async () => {
    for (const args of [['harnesses', 'list'], ['whoami'], ['vms', 'list', '--json']]) {
      const child = spawn(process.execPath, [BIN, ...args], {
        env: { ...process.env, AGENTVM_BASE_URL: url, XDG_CONFIG_HOME: configHome, AGENTVM_API_KEY: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // The reader is gone before the command has written anything: its first write fails with EPIPE.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (c) => (stderr += c));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      assert.equal(code, 141, `${args.join(' ')}: ${stderr}`);
      assert.equal(stderr, '', args.join(' '));
    }
  });

  test('MCP over streamable HTTP: the tools, read tools answer, a money tool with a read key is read_only_key', async () => {
    const read = JSON.parse((await cli(['keys', 'issue', '--json'])).stdout).key;
    const connect = async (key: string) => {
      const c = new Client({ name: 'test', version: '1.0.0' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      return c;
    };
    const rw = await connect(tenant.api_key);
    const { tools } = await rw.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['whoami', 'harnesses_list', 'vm_provision', 'vms_list', 'vm_run', 'templates_list', 'template_fork']) assert.ok(names.includes(n), n);
    const provision = tools.find((t) => t.name === 'vm_provision')!;
    assert.match(provision.description!, /charges money/);
    assert.equal(provision.annotations?.readOnlyHint, false);
    assert.equal(tools.find((t) => t.name === 'vm_destroy')!.annotations?.destructiveHint, true);
    for (const t of tools.filter((x) => x.annotations?.readOnlyHint)) {
      const missing: Record<string, Record<string, string | number>> = {
        vm_get: { id: 'vm_missing' },
        vm_egress_log: { id: 'vm_missing' },
        vm_metrics: { id: 'vm_missing' },
        vm_ports: { id: 'vm_missing' },
        vm_wait: { id: 'vm_missing', timeout_s: 1 },
        template_get: { id: 'tpl_missing' },
        runs_list: { id: 'vm_missing' },
        image_get: { id: 'img_missing' },
        snapshot_get: { id: 'snap_missing' },
        run_get: { id: 'vm_missing', run_id: 'run_missing' },
        webhook_deliveries_list: { webhook_id: 'wh_missing' },
        vm_file_read: { id: 'vm_missing', path: 'notes.md' },
        vm_files_list: { id: 'vm_missing' },
      };
      const args = t.name === 'harness_get' ? { name: 'echo' } : (missing[t.name] ?? {});
      const r = (await rw.callTool({ name: t.name, arguments: args })) as { isError?: boolean; content: { text: string }[] };
      if (missing[t.name]) {
        assert.equal(r.isError, true);
        assert.equal(JSON.parse(r.content[0].text).error, 'not_found');
      } else {
        assert.ok(!r.isError, `${t.name}: ${r.content[0].text}`);
      }
    }
    const ro = await connect(read);
    const denied = (await ro.callTool({ name: 'vm_provision', arguments: { harness: 'echo' } })) as { isError?: boolean; content: { text: string }[] };
    assert.equal(denied.isError, true);
    assert.equal(JSON.parse(denied.content[0].text).error, 'read_only_key');
    await rw.close();
    await ro.close();
    const anonymous = await fetch(`${url}/v1/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(anonymous.status, 401);
  });

  test('MCP on stdio (`agentvm mcp`) with the same key', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: { ...(process.env as Record<string, string>), AGENTVM_BASE_URL: url, AGENTVM_API_KEY: tenant.api_key },
    });
    const c = new Client({ name: 'stdio-test', version: '1.0.0' });
    await c.connect(transport);
    const r = (await c.callTool({ name: 'whoami', arguments: {} })) as { content: { text: string }[] };
    assert.equal(JSON.parse(r.content[0].text).tenant_id, tenant.tenant_id);
    const bad = (await c.callTool({ name: 'harness_get', arguments: { name: 'nope' } })) as { isError?: boolean; content: { text: string }[] };
    assert.equal(bad.isError, true);
    await c.close();
  });

  test('a VM with --wait, a run, destroy; then logout revokes the saved key', { skip: imageDir ? false : 'needs AGENTVM_TEST_IMAGE_DIR', timeout: 5 * 60_000 }, async () => {
    const created = await cli(['vms', 'create', '--harness', 'echo', '--wait', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const vm = JSON.parse(created.stdout);
    assert.equal(vm.status, 'running');
    assert.match(created.stderr, /running after [\d.]+ s/);
    const ran = await cli(['vms', 'run', vm.vm_id, 'hello', 'from', 'the', 'cli']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(JSON.parse(ran.stdout).task, 'hello from the cli');
    assert.equal((await cli(['vms', 'destroy', vm.vm_id])).code, 0);
  });

  test('runs from the CLI: output as it comes, --detach and runs logs --follow, Ctrl-C cancels, exit codes', { skip: imageDir ? false : 'needs AGENTVM_TEST_IMAGE_DIR', timeout: 5 * 60_000 }, async () => {
    const vm = JSON.parse((await cli(['vms', 'create', '--harness', 'ticker', '--wait', '--json'])).stdout);
    const ran = await cli(['vms', 'run', vm.vm_id, 'one']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, 'one\n');

    const detached = await cli(['vms', 'run', '--detach', vm.vm_id, 'x\ny\nz']);
    assert.equal(detached.code, 0, detached.stderr);
    const runId = detached.stdout.trim();
    assert.match(runId, /^run_[A-Za-z0-9]+$/);
    const followed = await cli(['runs', 'logs', vm.vm_id, runId, '--follow']);
    assert.equal(followed.code, 0, followed.stderr);
    assert.equal(followed.stdout, 'x\ny\nz\n');
    const listed = await cli(['runs', 'list', vm.vm_id]);
    assert.match(listed.stdout, new RegExp(`${runId}\\W+succeeded`));
    assert.match(listed.stdout, /│ x y z +│/, 'a task on one line');
    assert.equal(JSON.parse((await cli(['runs', 'get', vm.vm_id, runId, '--json'])).stdout).stdout, 'x\ny\nz\n');

    // Ctrl-C without a terminal cancels the run: the command exits 130 and the run is cancelled.
    const child = spawn(process.execPath, [BIN, 'vms', 'run', vm.vm_id, Array.from({ length: 30 }, (_, i) => `tick ${i}`).join('\n')], {
      env: { ...process.env, AGENTVM_BASE_URL: url, XDG_CONFIG_HOME: configHome, AGENTVM_API_KEY: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const code = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    await until('the first tick', async () => out.includes('tick 0\n'), 60_000);
    child.kill('SIGINT');
    assert.equal(await code, 130);
    const runs = JSON.parse((await cli(['runs', 'list', vm.vm_id, '--json'])).stdout).data;
    assert.equal(runs[0].status, 'cancelled');
    assert.ok(!out.includes('tick 29'));
    assert.equal((await cli(['runs', 'get', vm.vm_id, 'run_missing'])).code, 6);
    assert.equal((await cli(['vms', 'destroy', vm.vm_id])).code, 0);
  });

  test('logout revokes the saved key and forgets it', async () => {
    const saved = JSON.parse(await readFile(path.join(configHome, 'agentvm', 'config.json'), 'utf8'));
    const out = await cli(['logout']);
    assert.equal(out.code, 0, out.stderr);
    await assert.rejects(stat(path.join(configHome, 'agentvm', 'config.json')));
    await new Promise((r) => setTimeout(r, 600)); // the auth cache's lifetime
    assert.equal((await cli(['whoami'], { AGENTVM_API_KEY: saved.api_key })).code, 3);
  });
});
