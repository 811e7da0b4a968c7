/**
 * A shell and files in a real microVM, through a real server: the terminal (its user, its size, its
 * end), files both ways with their bytes intact, and every refusal (paths, sizes, scopes, tenants,
 * tickets, a VM that is not running). Needs QEMU and a built guest image (AGENTVM_TEST_IMAGE_DIR).
 * Harness programs run only inside the VM; its egress is `none`, so nothing leaves it.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { WebSocket } from 'ws';
import { execFile } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import * as ticketStore from '../src/store/shellTickets.ts';
import { killQemusUnder, seedSnapshots, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const MiB = 1024 * 1024;
const BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../bin/agentvm.js');

function client(base: string, key: string) {
  return async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text, headers: res.headers };
  };
}

/** A terminal on a shell socket: what it printed so far, and a way to wait for a line of it. */
class Terminal {
  out = '';
  closed: Promise<{ code: number; reason: string }>;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) this.out += (data as Buffer).toString('utf8');
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }
  static open(url: string): Promise<Terminal> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const t = new Terminal(ws);
      ws.once('open', () => resolve(t));
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })));
      ws.once('error', reject);
    });
  }
  type(text: string): void {
    this.ws.send(Buffer.from(text), { binary: true });
  }
  /** What the guest was doing, for a failure's message. */
  static diagnose: () => Promise<string> = async () => '';
  /** Waits for `re` in what was printed after `from`; answers the match. */
  async expect(re: RegExp, from = 0, ms = 120_000): Promise<RegExpExecArray> {
    try {
      return await until(`${re} in the terminal`, async () => re.exec(this.out.slice(from)) ?? undefined, ms);
    } catch (err) {
      throw new Error(`${(err as Error).message} (it shows: ${JSON.stringify(this.out.slice(-300))}; the guest: ${await Terminal.diagnose().catch((e: Error) => e.message)})`);
    }
  }
  /** Types a command with a marker around its answer, and answers what it printed. */
  async run(command: string): Promise<string> {
    const tag = `m${randomBytes(4).toString('hex')}`;
    const from = this.out.length;
    this.type(`echo ${tag}-begin; ${command}; echo ${tag}-end\n`);
    // The answer's lines, not the command's echo (there the marker follows `echo `).
    const m = await this.expect(new RegExp(`[\\r\\n]${tag}-begin\\r?\\n([^]*?)${tag}-end`), from);
    return m[1].replace(/\r/g, '').trim();
  }
}

/** A PUT of a body the test controls: declared length, bytes actually sent, or a cut in the middle. */
function rawPut(base: string, key: string, p: string, opts: { length?: number; send: Buffer[]; cut?: boolean }): Promise<{ status: number; body: any } | 'cut'> {
  const u = new URL(`${base}${p}`);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' };
    if (opts.length !== undefined) headers['content-length'] = String(opts.length);
    const req = http.request({ host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, method: 'PUT', headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', (err) => (opts.cut ? resolve('cut') : reject(err)));
    (async () => {
      for (const b of opts.send) if (!req.write(b)) await new Promise((r) => req.once('drain', r));
      if (opts.cut) {
        await new Promise((r) => setTimeout(r, 500));
        req.destroy();
      } else {
        req.end();
      }
    })();
  });
}

describe('a shell and files in a real microVM', { skip }, () => {
  let dataDir: string;
  let server: RunningServer;
  let api: ReturnType<typeof client>;
  let readOnly: ReturnType<typeof client>;
  let stranger: ReturnType<typeof client>;
  let key: string;
  let vmId: string;
  const logs: string[] = [];

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-shell-'));
    process.env.AGENTVM_ADMIN_TOKEN = 'avm_admin_test_token_0123456789abcdefghijkl';
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    // Errors of the server go to the test's output: a 500 says no more than that.
    const sink = new Writable({
      write: (c, _e, cb) => {
        const line = c.toString();
        logs.push(line);
        if (/"level":(50|60)/.test(line)) process.stderr.write(line);
        cb();
      },
    });
    await seedSnapshots(dataDir);
    server = await startServer(config, createLogger('info', sink));
    await server.host.imageReady;
    const admin = client(server.url, config.adminToken!);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'shell@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    key = tenant.body.api_key;
    api = client(server.url, key);
    readOnly = client(server.url, (await api('POST', '/v1/api/keys', { scope: 'read' })).body.key);
    const other = await admin('POST', '/v1/admin/tenants', { email: 'stranger@example.com' });
    stranger = client(server.url, other.body.api_key);
    // A clone of the golden VM: its data port must work after the resume too.
    await server.host.prewarmed;
    const created = await api('POST', '/v1/api/vms', { harness: 'opencode', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, created.text);
    vmId = created.body.vm_id;
    await until(`${vmId} running`, async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running';
    });
    assert.equal(server.host.driver!.startedFrom(vmId), 'snapshot');
    Terminal.diagnose = async () => (await exec(['ps', '-eo', 'pid,sid,stat,time,args'])).stdout.split('\n').filter((l) => !/\[/.test(l)).join(' | ');
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  const exec = (argv: string[]) => server.host.driver!.exec(vmId, { argv }, 30_000);
  const shellUrl = async () => {
    const r = await api('POST', `/v1/api/vms/${vmId}/shell`);
    assert.equal(r.status, 201, r.text);
    return r.body as { url: string; expires_at: string };
  };

  test('a shell: the user agent in the workspace, the arithmetic, the size following a resize, the run environment, its exit', { timeout: 5 * 60_000 }, async () => {
    const { url, expires_at } = await shellUrl();
    assert.match(url, new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/v1/api/vms/${vmId}/shell/socket\\?ticket=`));
    const ttl = Date.parse(expires_at) - Date.now();
    assert.ok(ttl > 50_000 && ttl <= 60_000, `the ticket is good for 60 s (${ttl} ms left)`);
    const before = Date.now();
    const t = await Terminal.open(`${url}&cols=100&rows=30`);
    assert.equal(await t.run('echo $((6*7))'), '42');
    // An open shell is activity for the VM's idle stop.
    const [touched] = await server.services.db.query<{ last_activity_at: Date | null }>('SELECT last_activity_at FROM vms WHERE vm_id = $1', [vmId]);
    assert.ok(touched.last_activity_at && touched.last_activity_at.getTime() >= before - 1000, `last_activity_at ${touched.last_activity_at}`);
    assert.equal(await t.run('id -un'), 'agent');
    assert.equal(await t.run('pwd'), '/persist/workspace');
    assert.equal(await t.run('stty size'), '30 100');
    t.ws.send(JSON.stringify({ type: 'resize', cols: 132, rows: 43 }));
    await until('the new size', async () => (await t.run('stty size')) === '43 132', 30_000);
    assert.equal(await t.run('echo $TERM'), 'xterm-256color');
    assert.equal(await t.run('echo $HTTPS_PROXY'), 'http://gateway.agentvm.internal:3128');
    assert.equal(await t.run('tty >/dev/null && echo a terminal'), 'a terminal');
    // The ticket was good once.
    await assert.rejects(Terminal.open(url), (err: { status?: number }) => err.status === 401);
    t.type('exit 3\n');
    assert.deepEqual(await t.closed, { code: 1000, reason: 'exit 3' });
  });

  test("opencode's login starts in the shell and asks which provider", { timeout: 10 * 60_000 }, async () => {
    const t = await Terminal.open((await shellUrl()).url);
    const from = t.out.length;
    t.type('opencode auth login\n');
    // It cannot finish without its provider: it prompts, and that is what a person answers.
    const m = await t.expect(/Select provider/, from, 8 * 60_000);
    assert.ok(m[0]);
    t.ws.close();
    await t.closed;
  });

  test('several shells at once; closing a socket ends its processes, background jobs too', { timeout: 5 * 60_000 }, async () => {
    const a = await Terminal.open((await shellUrl()).url);
    const b = await Terminal.open((await shellUrl()).url);
    // Job control prints `[1] PID` first: the last line is echo's.
    const last = (s: string) => s.split('\n').at(-1)!;
    const [pidA, pidB] = [last(await a.run('sleep 900 & echo $!')), last(await b.run('sleep 901 & echo $!'))];
    assert.match(pidA, /^\d+$/);
    assert.notEqual(pidA, pidB);
    assert.equal(await b.run('echo b'), 'b');
    const from = a.out.length;
    a.type('sleep 902\n'); // in the foreground, when the socket closes
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(a.out.length >= from);
    a.ws.close();
    await a.closed;
    await until('shell a ended', async () => (await exec(['sh', '-c', 'pgrep -x sleep -a || true'])).stdout.split('\n').every((l) => !/sleep 90[02]$/.test(l.trim())), 30_000);
    const left = (await exec(['sh', '-c', 'pgrep -x sleep -a || true'])).stdout;
    assert.match(left, /sleep 901/, 'the other shell goes on');
    assert.equal(await b.run('echo still here'), 'still here');
    b.ws.close();
    await b.closed;
    await until('shell b ended', async () => !/sleep 901/.test((await exec(['sh', '-c', 'pgrep -x sleep -a || true'])).stdout), 30_000);
  });

  test('a 50 MiB file goes in and comes out with its SHA-256; it and its new parents belong to agent', { timeout: 10 * 60_000 }, async () => {
    // Not a whole number of disk blocks: the last of a download read past the page cache is partial.
    const data = randomBytes(50 * MiB + 333);
    const digest = createHash('sha256').update(data).digest('hex');
    const put = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent('deep/er/blob.bin')}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      body: data,
    });
    assert.equal(put.status, 201, await put.clone().text());
    assert.deepEqual(await put.json(), { path: '/persist/workspace/deep/er/blob.bin', size: data.length });
    const owners = await exec(['stat', '-c', '%U %n', '/persist/workspace/deep', '/persist/workspace/deep/er', '/persist/workspace/deep/er/blob.bin']);
    assert.deepEqual(owners.stdout.trim().split('\n').map((l) => l.split(' ')[0]), ['agent', 'agent', 'agent']);
    const guestSum = await exec(['sha256sum', '/persist/workspace/deep/er/blob.bin']);
    assert.equal(guestSum.stdout.split(' ')[0], digest);

    const get = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=/persist/workspace/deep/er/blob.bin`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(get.status, 200);
    assert.equal(get.headers.get('content-type'), 'application/octet-stream');
    assert.equal(get.headers.get('content-length'), String(data.length));
    const hash = createHash('sha256');
    for await (const chunk of get.body as unknown as AsyncIterable<Uint8Array>) hash.update(chunk);
    assert.equal(hash.digest('hex'), digest);

    const list = await api('GET', `/v1/api/vms/${vmId}/files?path=deep/er`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((e: any) => [e.name, e.type, e.size]), [['blob.bin', 'file', data.length]]);
    assert.ok(Date.parse(list.body.data[0].mtime) > Date.now() - 10 * 60_000);
    // Replaced whole; a read key may read.
    const small = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=deep/er/blob.bin`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: 'hello\n' });
    assert.equal(small.status, 201);
    assert.equal((await readOnly('GET', `/v1/api/vms/${vmId}/files?path=deep/er/blob.bin`)).text, 'hello\n');
  });

  test('paths that leave the persist disk are 400 naming path, and nothing is written', { timeout: 5 * 60_000 }, async () => {
    const t = await Terminal.open((await shellUrl()).url);
    await t.run('ln -s /etc etc-link; ln -s /persist/home home-link; mkdir -p keep; ln -s /nowhere dangling');
    t.ws.close();
    for (const p of ['../x', 'a/../../x', '/etc/passwd', '/persist/.agentvm/secrets.json', 'etc-link/passwd', 'etc-link', 'a\u0000b', '']) {
      const get = await api('GET', `/v1/api/vms/${vmId}/files?path=${encodeURIComponent(p)}`);
      assert.equal(get.status, 400, `GET ${JSON.stringify(p)}: ${get.text}`);
      assert.equal(get.body.error, 'invalid_request');
      assert.match(get.body.message, /^path: /, get.body.message);
      const put = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent(p === 'etc-link' ? 'etc-link/agentvm-was-here' : p)}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
        body: 'x',
      });
      assert.equal(put.status, 400, `PUT ${JSON.stringify(p)}`);
      assert.match((await put.json()).message, /^path: /);
    }
    assert.equal((await exec(['sh', '-c', 'ls /etc/agentvm-was-here /etc/x 2>/dev/null | wc -l'])).stdout.trim(), '0');
    // A link that stays on the disk is followed; one to nothing is refused for a write; a missing file is 404.
    assert.equal((await api('GET', `/v1/api/vms/${vmId}/files?path=home-link`)).status, 200);
    assert.equal((await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=dangling`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: 'x' })).status, 400);
    const missing = await api('GET', `/v1/api/vms/${vmId}/files?path=no/such/file`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error, 'not_found');
    const noPath = await api('GET', `/v1/api/vms/${vmId}/files`);
    assert.equal(noPath.status, 400);
    assert.match(noPath.body.message, /^path: /);
  });

  test('over 100 MiB is 413 and a cut upload leaves nothing; a read key, another tenant, a wrong body type are refused', { timeout: 10 * 60_000 }, async () => {
    const twins = async () => (await exec(['sh', '-c', 'ls -A /persist/workspace/big; true'])).stdout.trim();
    await exec(['sh', '-c', 'mkdir -p /persist/workspace/big && chown agent:agent /persist/workspace/big']);
    // Declared too large: refused before a byte reaches the VM.
    const declared = await rawPut(server.url, key, `/v1/api/vms/${vmId}/files?path=big/declared`, { length: 100 * MiB + 1, send: [] });
    assert.notEqual(declared, 'cut');
    assert.equal((declared as any).status, 413);
    assert.equal((declared as any).body.error, 'payload_too_large');
    // Chunked, without a length, running over: cut at the limit, nothing left.
    const chunk = Buffer.alloc(4 * MiB, 7);
    const over = await rawPut(server.url, key, `/v1/api/vms/${vmId}/files?path=big/over`, { send: Array.from({ length: 26 }, () => chunk) });
    assert.notEqual(over, 'cut');
    assert.equal((over as any).status, 413);
    assert.equal(await until('nothing left of the large upload', async () => ((await twins()) === '' ? 'empty' : undefined), 30_000), 'empty');
    // A client that goes away in the middle.
    const cut = await rawPut(server.url, key, `/v1/api/vms/${vmId}/files?path=big/cut`, { length: 20 * MiB, send: [Buffer.alloc(5 * MiB, 1)], cut: true });
    assert.equal(cut, 'cut');
    assert.equal(await until('nothing left of the cut upload', async () => ((await twins()) === '' ? 'empty' : undefined), 30_000), 'empty');

    const wrongType = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=big/t`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, body: 'x' });
    assert.equal(wrongType.status, 415);
    assert.equal((await readOnly('POST', `/v1/api/vms/${vmId}/shell`)).status, 403);
    const roPut = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=big/ro`, { method: 'PUT', headers: { authorization: `Bearer ${(await api('POST', '/v1/api/keys', { scope: 'read' })).body.key}`, 'content-type': 'application/octet-stream' }, body: 'x' });
    assert.equal(roPut.status, 403);
    assert.equal((await roPut.json()).error, 'read_only_key');
    for (const [m, p] of [['POST', 'shell'], ['GET', 'files?path=big'], ['PUT', 'files?path=big/s']] as const) {
      const r = await stranger(m, `/v1/api/vms/${vmId}/${p}`);
      assert.equal(r.status, 404, `${m} ${p} by another tenant`);
      assert.equal(r.body.error, 'not_found');
    }
    assert.equal(await twins(), '');
  });

  test('the CLI copies a repository in and the work out, and opens a shell on a pipe; the MCP file tools', { timeout: 10 * 60_000 }, async () => {
    const env = { ...process.env, AGENTVM_BASE_URL: server.url, AGENTVM_API_KEY: key, XDG_CONFIG_HOME: dataDir };
    const cli = (args: string[], input?: string) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        const child = execFile(process.execPath, [BIN, ...args], { env, maxBuffer: 16 * MiB }, (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
        child.stdin!.end(input ?? '');
      });
    const repo = path.join(dataDir, 'repo');
    await mkdir(path.join(repo, 'src', 'lib'), { recursive: true });
    await writeFile(path.join(repo, 'README.md'), '# a repository\n');
    const blob = randomBytes(3 * MiB);
    await writeFile(path.join(repo, 'src', 'lib', 'blob.bin'), blob);
    await symlink('README.md', path.join(repo, 'link'));
    const inward = await cli(['vms', 'cp', repo, `${vmId}:cli/repo`]);
    assert.equal(inward.code, 0, inward.stderr);
    assert.match(inward.stderr, /copied 2 files/);
    // The shell on a pipe: what it prints, and its status as the command's.
    const shell = await cli(['vms', 'shell', vmId], 'cd cli/repo && sha256sum src/lib/blob.bin && echo made > out.txt && exit 4\n');
    assert.equal(shell.code, 4, shell.stderr);
    assert.match(shell.stdout, new RegExp(createHash('sha256').update(blob).digest('hex')));
    const back = path.join(dataDir, 'back');
    const outward = await cli(['vms', 'cp', `${vmId}:cli/repo`, back]);
    assert.equal(outward.code, 0, outward.stderr);
    assert.equal(await readFile(path.join(back, 'out.txt'), 'utf8'), 'made\n');
    assert.ok((await readFile(path.join(back, 'src', 'lib', 'blob.bin'))).equals(blob));
    const refused = await cli(['vms', 'cp', repo, `${vmId}:../x`]);
    assert.equal(refused.code, 4);
    assert.match(refused.stderr, /error: invalid_request: path: /);

    const mcp = new Client({ name: 'test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    type ToolResult = { isError?: boolean; content: { text: string }[] };
    const tool = async (name: string, args: Record<string, unknown>) => {
      const r = (await mcp.callTool({ name, arguments: args })) as ToolResult;
      return { error: r.isError === true, body: JSON.parse(r.content[0].text) };
    };
    assert.deepEqual((await tool('vm_file_write', { id: vmId, path: 'mcp/notes.md', content: 'héllo\n' })).body, { path: '/persist/workspace/mcp/notes.md', size: 7 });
    assert.deepEqual((await tool('vm_file_read', { id: vmId, path: 'mcp/notes.md' })).body, { path: 'mcp/notes.md', size: 7, encoding: 'utf8', content: 'héllo\n' });
    const bytes = Buffer.from([0, 1, 2, 255]);
    await tool('vm_file_write', { id: vmId, path: 'mcp/b.bin', content: bytes.toString('base64'), encoding: 'base64' });
    const readBack = await tool('vm_file_read', { id: vmId, path: 'mcp/b.bin' });
    assert.equal(readBack.body.encoding, 'base64');
    assert.ok(Buffer.from(readBack.body.content, 'base64').equals(bytes));
    assert.deepEqual((await tool('vm_files_list', { id: vmId, path: 'mcp' })).body.data.map((e: { name: string }) => e.name), ['b.bin', 'notes.md']);
    const big = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=mcp/big.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      body: Buffer.alloc(5 * MiB),
    });
    assert.equal(big.status, 201);
    const tooBig = await tool('vm_file_read', { id: vmId, path: 'mcp/big.bin' });
    assert.equal(tooBig.error, true);
    assert.equal(tooBig.body.error, 'payload_too_large');
    const escape = await tool('vm_file_read', { id: vmId, path: '/etc/passwd' });
    assert.equal(escape.error, true);
    assert.equal(escape.body.error, 'invalid_request');
    await mcp.close();
  });

  test('an expired ticket is refused; the VM stopping closes an open shell with a reason; a stopped VM is 409', { timeout: 5 * 60_000 }, async () => {
    const expired = `avm_shell_${randomBytes(24).toString('base64url')}`;
    const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
    const [tenant] = await server.services.db.query<{ tenant_id: string }>('SELECT tenant_id FROM vms WHERE vm_id = $1', [vm.vm_id]);
    const past = new Date(Date.now() - 1000);
    await ticketStore.insert(server.services.db, { ticket_hash: createHash('sha256').update(expired).digest('hex'), tenant_id: tenant.tenant_id, vm_id: vmId, expires_at: past }, new Date(past.getTime() - 60_000));
    const base = new URL((await shellUrl()).url);
    await assert.rejects(Terminal.open(`${base.origin}${base.pathname}?ticket=${expired}`), (err: { status?: number }) => err.status === 401);

    const t = await Terminal.open((await shellUrl()).url);
    assert.equal(await t.run('echo up'), 'up');
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/stop`)).status, 200);
    const closed = await t.closed;
    assert.equal(closed.code, 4409);
    assert.match(closed.reason, /^vm_not_running: .*stopped/);
    await until('stopped', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'stopped');
    for (const [m, p] of [['POST', 'shell'], ['GET', 'files?path=big'], ['PUT', 'files?path=big/s']] as const) {
      const r = await api(m, `/v1/api/vms/${vmId}/${p}`);
      assert.equal(r.status, 409, `${m} ${p} on a stopped VM`);
      assert.equal(r.body.error, 'vm_not_running');
    }
  });
});
