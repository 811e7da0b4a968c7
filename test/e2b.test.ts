/**
 * E2B's SDK (the `e2b` npm package, unchanged) against a real server and one real microVM, by the
 * three environment variables of the README alone: the control plane (create, info, list, timeout,
 * kill), commands (output kept apart, exit codes, envs, background with stdin, list, kill), files
 * (write, read, list, stat, mkdir, rename, remove, outside the persist disk) and a PTY. Then what the
 * SDK never sends: E2B's error shapes for a read key, a tenant without card or credits and another
 * tenant's sandbox, and a malformed Connect message (invalid_argument, nothing done). Needs QEMU and a
 * built guest image (AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, CommandExitError, TimeoutError } from 'e2b';
import type { RunningServer } from '../src/server.ts';
import { apiClient, until } from './helpers.ts';
import { GuestProcess } from '../src/e2b/guestProcess.ts';
import { startVmTestServer, type VmTestServer } from './vmServer.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';

describe("E2B's SDK against agentvm", { skip }, () => {
  let t: VmTestServer;
  let server: RunningServer;
  let sandbox: Sandbox;
  let e2bKey: string;
  let readKey: string;
  let strangerKey: string;
  let brokeKey: string;
  const saved = { ...process.env };

  /** A raw call to the server (what the SDK would not send). */
  const call = async (method: string, p: string, opts: { key?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const res = await fetch(`${server.url}${p}`, {
      method,
      headers: { ...(opts.key ? { 'X-API-Key': opts.key } : {}), ...(opts.body ? { 'content-type': 'application/json' } : {}), ...(opts.headers ?? {}) },
      body: opts.body,
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: body as Record<string, unknown> };
  };

  before(async () => {
    t = await startVmTestServer('e2b');
    server = t.server;
    const { admin, api } = t;
    const issued = await api('POST', '/v1/api/keys', { label: 'e2b', scope: 'readwrite', format: 'e2b' });
    assert.equal(issued.status, 201, JSON.stringify(issued.body));
    e2bKey = issued.body.key;
    readKey = (await api('POST', '/v1/api/keys', { scope: 'read', format: 'e2b' })).body.key;
    const stranger = await admin('POST', '/v1/admin/tenants', { email: 'e2b-stranger@example.com' });
    await admin('PUT', `/v1/admin/tenants/${stranger.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    strangerKey = (await apiClient(server.url, stranger.body.api_key)('POST', '/v1/api/keys', { scope: 'readwrite', format: 'e2b' })).body.key;
    const broke = await admin('POST', '/v1/admin/tenants', { email: 'e2b-broke@example.com' });
    brokeKey = (await apiClient(server.url, broke.body.api_key)('POST', '/v1/api/keys', { scope: 'readwrite', format: 'e2b' })).body.key;
    // The README's three variables, and nothing else.
    process.env.E2B_API_URL = `${server.url}/e2b`;
    process.env.E2B_SANDBOX_URL = `${server.url}/e2b/sandbox`;
    process.env.E2B_API_KEY = e2bKey;
    sandbox = await Sandbox.create('base', { allowInternetAccess: false, timeoutMs: 3_600_000, metadata: { suite: 'e2b' }, envs: { GREETING: 'hi there' }, requestTimeoutMs: 600_000 });
  });

  after(async () => {
    for (const k of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
    await t?.close();
  });

  test('an e2b-format key: e2b_ and 40 hex digits, an ordinary key of its scope', async () => {
    assert.match(e2bKey, /^e2b_[0-9a-f]{40}$/);
    const who = await fetch(`${server.url}/v1/api/whoami`, { headers: { authorization: `Bearer ${e2bKey}` } });
    assert.equal(who.status, 200);
  });

  test('create answers a running sandbox: its id is the VM label, getInfo and list show its metadata', async () => {
    assert.match(sandbox.sandboxId, /^vm-[a-z0-9]+$/);
    const info = await Sandbox.getInfo(sandbox.sandboxId);
    assert.equal(info.sandboxId, sandbox.sandboxId);
    assert.equal(info.templateId, 'base');
    assert.deepEqual(info.metadata, { suite: 'e2b' });
    assert.equal(info.state, 'running');
    const listed = await Sandbox.list().nextItems();
    assert.ok(listed.some((s) => s.sandboxId === sandbox.sandboxId && s.metadata.suite === 'e2b'), JSON.stringify(listed));
    assert.equal(await sandbox.isRunning(), true);
  });

  test("a sandbox's ports are public, as E2B's allowPublicTraffic (its default) makes them", async () => {
    const vms = (await t.api('GET', '/v1/api/vms')).body.data;
    const target = (vmId: string) => ({ vm_id: vmId, tenant_id: t.tenant.tenant_id, status: 'running', desired_state: 'running', auto_resume: false, preview_host: null });
    const none = { bearer: null, token: null };
    assert.equal(await server.services.previews.allowed(target(vms[0].vm_id), 8000, none), true);
    assert.equal(await server.services.previews.allPortsPublic(vms[0].vm_id), true);
  });

  test('commands.run: stdout and stderr apart, the exit code, the sandbox envs and the command envs', async () => {
    const ok = await sandbox.commands.run('echo "$GREETING"; echo "$OWN" >&2', { envs: { OWN: 'mine' } });
    assert.equal(ok.exitCode, 0);
    assert.equal(ok.stdout, 'hi there\n');
    assert.equal(ok.stderr, 'mine\n');
    await assert.rejects(sandbox.commands.run('printf out; printf err >&2; exit 3'), (err: unknown) => {
      assert.ok(err instanceof CommandExitError, String(err));
      assert.equal(err.exitCode, 3);
      assert.equal(err.stdout, 'out');
      assert.equal(err.stderr, 'err');
      return true;
    });
    assert.equal((await sandbox.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
    assert.equal((await sandbox.commands.run('pwd; readlink -f .')).stdout, '/home/user\n/persist/workspace\n');
    const root = await sandbox.commands.run('id -un; echo "$HOME $GREETING"; echo "$HTTPS_PROXY" | grep -c .; pwd', { user: 'root' });
    assert.equal(root.stdout, 'root\n/root hi there\n1\n/root\n', "root, with the environment a process of the user has (the egress proxy too), in root's home");
    await assert.rejects(sandbox.commands.run('true', { cwd: '/no/such/dir' }), (err: unknown) => {
      assert.ok(err instanceof CommandExitError, String(err));
      assert.equal(err.exitCode, 1);
      assert.match(err.stderr, /cwd \/no\/such\/dir: No such file or directory/);
      return true;
    });
  });

  test('a command takes the login shell the guest keeps ready, and sees what a login shell of its own would', async () => {
    const probe = 'case "$BASH_EXECUTION_STRING" in *__agentvm_cm[d]*) echo ready;; *) echo own;; esac; echo "$HOSTNAME $SECONDS"; hostname; env | grep -v "^_=" | sort';
    await sandbox.commands.run('true', { envs: { OWN: 'mine' } });
    // Two at once, each waiting for the other to start: one takes the shell the last command left ready, one starts its own.
    const barrier = `mkdir -p /tmp/both && touch /tmp/both/$$ && until [ "$(ls /tmp/both | wc -l)" -ge 2 ]; do sleep 0.05; done; ${probe}`;
    const both = (await Promise.all([sandbox.commands.run(barrier), sandbox.commands.run(barrier)])).map((r) => r.stdout.split('\n'));
    const ready = both.find((lines) => lines[0] === 'ready');
    const own = both.find((lines) => lines[0] === 'own');
    assert.ok(ready && own, JSON.stringify(both.map((b) => b[0])));
    const [hostname, seconds] = ready[1].split(' ');
    assert.equal(hostname, ready[2], "the sandbox's host name, not the standby's it was started in");
    assert.ok(Number(seconds) < 5, `SECONDS counts from the command's start: ${seconds}`);
    assert.deepEqual(ready.slice(3), own.slice(3), 'the same environment: the sandbox envs, the login, no OWN of the command before');
  });

  test("a guest older than protocol 7 (a VM of an earlier image): the same process through a login shell and the Perl framer", async () => {
    const vmId = (await t.api('GET', '/v1/api/vms')).body.data[0].vm_id;
    // The shell a guest of an earlier protocol opens when asked for a process: a login shell, not framed.
    const shell = await server.host.guest!.openShell(vmId, { cols: 80, rows: 24, env: {} });
    assert.equal(shell.framed, false);
    const proc = new GuestProcess(shell, { argv: ['/bin/sh', '-c', 'read line; echo "got $line"; echo "$OWN" >&2; exit 4'], env: { OWN: 'mine' }, cwd: '/tmp', root: false, stdin: true, pty: null });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    proc.on('stdout', (b: Buffer) => out.push(b));
    proc.on('stderr', (b: Buffer) => err.push(b));
    const ended = new Promise<{ exitCode: number }>((resolve) => proc.once('end', resolve));
    await proc.start();
    assert.ok(proc.pid > 0);
    await proc.sendStdin(Buffer.from('a line\n'));
    await proc.closeStdin();
    assert.equal((await ended).exitCode, 4);
    assert.equal(Buffer.concat(out).toString(), 'got a line\n');
    assert.equal(Buffer.concat(err).toString(), 'mine\n');
  });

  test('a background command: stdin, list, kill', async () => {
    const handle = await sandbox.commands.run('cat', { background: true, stdin: true });
    assert.ok(handle.pid > 0);
    await sandbox.commands.sendStdin(handle.pid, 'through stdin\n');
    await until('the echo of stdin', async () => handle.stdout.includes('through stdin\n'), 60_000);
    const listed = await sandbox.commands.list();
    assert.ok(listed.some((p) => p.pid === handle.pid), JSON.stringify(listed));
    // A process followed here holds a place in run_streams (section 14), as a shell does: the last place taken, the next is refused.
    const streams = async () => (await t.api('GET', '/v1/api/limits')).body.usage.run_streams as number;
    assert.equal(await streams(), 1);
    const limits = `/v1/admin/tenants/${t.tenant.tenant_id}/limits`;
    assert.equal((await t.admin('PUT', limits, { run_streams: 1 })).status, 200);
    try {
      await assert.rejects(sandbox.commands.run('echo never', { background: true }), /quota_exceeded: .*run_streams/);
    } finally {
      assert.equal((await t.admin('PUT', limits, { run_streams: null })).status, 200);
    }
    assert.equal(await sandbox.commands.kill(handle.pid), true);
    await assert.rejects(handle.wait());
    assert.ok(!(await sandbox.commands.list()).some((p) => p.pid === handle.pid));
    await until('its place given back', async () => (await streams()) === 0, 10_000);
  });

  test('files: write, read, list, stat, mkdir, rename, remove, metadata, and a path outside the persist disk', async () => {
    const info = await sandbox.files.write('e2b-dir/a.txt', 'first file', { metadata: { author: 'mish' } });
    assert.equal(info.path, '/home/user/e2b-dir/a.txt', "E2B's user directory, a link to the workspace");
    assert.deepEqual(info.metadata, { author: 'mish' });
    assert.equal(await sandbox.files.read('e2b-dir/a.txt'), 'first file');
    assert.equal((await sandbox.commands.run('cat /persist/workspace/e2b-dir/a.txt')).stdout, 'first file');
    const entries = await sandbox.files.list('e2b-dir');
    assert.deepEqual(entries.map((e) => [e.name, e.type, e.size, e.metadata]), [['a.txt', 'file', 10, { author: 'mish' }]]);
    const stat = await sandbox.files.getInfo('e2b-dir/a.txt');
    assert.equal(stat.type, 'file');
    assert.deepEqual(stat.metadata, { author: 'mish' }, "kept as the file's extended attribute user.e2b.author");
    assert.equal(stat.owner, 'user', "agentvm's agent by E2B's name");
    assert.equal(await sandbox.files.makeDir('e2b-dir/sub'), true);
    assert.equal(await sandbox.files.makeDir('e2b-dir/sub'), false, 'made already');
    assert.deepEqual((await sandbox.files.rename('e2b-dir/a.txt', 'e2b-dir/sub/b.txt')).metadata, { author: 'mish' });
    assert.equal(await sandbox.files.exists('e2b-dir/a.txt'), false);
    assert.equal(await sandbox.files.read('e2b-dir/sub/b.txt'), 'first file');
    assert.equal((await sandbox.files.write('e2b-dir/sub/b.txt', 'again')).metadata, undefined);
    assert.equal((await sandbox.files.getInfo('e2b-dir/sub/b.txt')).metadata, undefined, 'a write without metadata leaves none');
    await sandbox.files.remove('e2b-dir');
    assert.equal(await sandbox.files.exists('e2b-dir'), false);
    await sandbox.files.remove('e2b-dir', {}); // gone already: E2B's remove of nothing is no error
    await sandbox.files.write('/tmp/e2b-outside.txt', 'not on the persist disk');
    assert.equal(await sandbox.files.read('/tmp/e2b-outside.txt'), 'not on the persist disk');
    // From the root filesystem into the workspace (another disk): moved, as on E2B's one filesystem.
    assert.equal((await sandbox.files.rename('/tmp/e2b-outside.txt', 'e2b-moved.txt')).path, '/home/user/e2b-moved.txt');
    assert.equal(await sandbox.files.read('e2b-moved.txt'), 'not on the persist disk');
    assert.equal(await sandbox.files.exists('/tmp/e2b-outside.txt'), false);
    // An endless file is cut off at the files' cap (413), not read into the server's memory.
    await assert.rejects(sandbox.files.read('/dev/zero', { requestTimeoutMs: 600_000 }), /larger than 100 MiB/);
    // Where only root may write, as E2B's envd: root writes, the user gets the file and the directories made.
    await sandbox.files.write('/e2b-top/sub/f.txt', 'at the top', { metadata: { where: 'top' } });
    assert.deepEqual((await sandbox.files.getInfo('/e2b-top/sub/f.txt')).metadata, { where: 'top' });
    await sandbox.files.write('/e2b-top/sub/f.txt', 'at the top');
    assert.equal((await sandbox.files.getInfo('/e2b-top/sub/f.txt')).metadata, undefined, 'the same file written over: its metadata gone');
    assert.equal((await sandbox.commands.run('stat -c %U /e2b-top /e2b-top/sub /e2b-top/sub/f.txt; cat /e2b-top/sub/f.txt')).stdout, 'agent\nagent\nagent\nat the top');
    await sandbox.commands.run('ln -s f.txt /e2b-top/sub/link.txt');
    assert.equal((await sandbox.files.getInfo('/e2b-top/sub/link.txt')).symlinkTarget, '/e2b-top/sub/f.txt', 'a relative link, answered whole');
    await assert.rejects(sandbox.files.read('no-such-file.txt'), /not exist|not found/i);
    // Signed file URLs: they carry no token, and name the sandbox by their signature alone (E2B_SANDBOX_URL's origin).
    await sandbox.files.write('e2b-signed.txt', 'signed');
    const down = await sandbox.downloadUrl('e2b-signed.txt', { useSignatureExpiration: 60 });
    assert.ok(down.startsWith(`${server.url}/files?`), down);
    const got = await fetch(down);
    assert.equal(got.status, 200);
    assert.equal(await got.text(), 'signed');
    const forged = new URL(down);
    forged.searchParams.set('path', '/etc/shadow');
    assert.deepEqual(await (await fetch(forged)).json(), { code: 401, message: 'invalid signature' });
    const expired = await fetch(await sandbox.downloadUrl('e2b-signed.txt', { useSignatureExpiration: -10 }));
    assert.deepEqual([expired.status, await expired.json()], [401, { code: 401, message: 'signature is already expired' }]);
    const form = new FormData();
    form.append('file', 'from a signed URL'); // a text field: the file's bytes, at the URL's path
    const up = await fetch(await sandbox.uploadUrl('signed-root.txt', { user: 'root', useSignatureExpiration: 60 }), { method: 'POST', body: form });
    assert.deepEqual([up.status, await up.json()], [200, [{ name: 'signed-root.txt', type: 'file', path: '/root/signed-root.txt' }]], "a relative path is the user's home's: root's /root");
    assert.equal(await sandbox.files.read('/root/signed-root.txt', { user: 'root' }), 'from a signed URL');
  });

  test('a PTY: input typed, output as a terminal shows it, then killed', async () => {
    let out = '';
    const pty = await sandbox.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += Buffer.from(d).toString()) });
    await sandbox.pty.sendInput(pty.pid, new TextEncoder().encode('echo $((6*7))x\n'));
    await until('the PTY output', async () => out.includes('42x'), 60_000);
    assert.equal(await sandbox.pty.kill(pty.pid), true);
    await assert.rejects(sandbox.commands.run(`kill -0 ${pty.pid}`), 'the terminal\'s program is gone when the kill answers');
  });

  test("E2B's error shapes: a read key (403), no card nor credits (402), another tenant (404), no key (401)", async () => {
    const create = JSON.stringify({ templateID: 'base' });
    const read = await call('POST', '/e2b/v2/sandboxes', { key: readKey, body: create });
    assert.equal(read.status, 403);
    assert.equal(read.body.code, 403);
    assert.match(String(read.body.message), /read_only_key/);
    const broke = await call('POST', '/e2b/v2/sandboxes', { key: brokeKey, body: create });
    assert.equal(broke.status, 402, JSON.stringify(broke.body));
    assert.equal(broke.body.code, 402);
    assert.deepEqual((await call('GET', '/e2b/v2/sandboxes', { key: brokeKey })).body, [], 'nothing was made');
    const other = await call('GET', `/e2b/sandboxes/${sandbox.sandboxId}`, { key: strangerKey });
    assert.equal(other.status, 404);
    assert.equal(other.body.code, 404);
    assert.equal((await call('DELETE', `/e2b/sandboxes/${sandbox.sandboxId}`, { key: strangerKey })).status, 404);
    assert.equal((await call('GET', '/e2b/v2/sandboxes')).status, 401);
    assert.equal(await sandbox.isRunning(), true);
  });

  test('the sandbox plane: a wrong access token is 401; a malformed Connect message is invalid_argument and runs nothing', async () => {
    const headers = { 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '49983' };
    const wrong = await call('POST', '/e2b/sandbox/process.Process/List', { body: '{}', headers: { ...headers, 'x-access-token': 'ea_wrong' } });
    assert.equal(wrong.status, 401);
    const token = (await call('GET', `/e2b/sandboxes/${sandbox.sandboxId}`, { key: e2bKey })).body.envdAccessToken as string;
    const marker = `/tmp/e2b-malformed-${Date.now()}`;
    const bad = await call('POST', '/e2b/sandbox/process.Process/SendInput', {
      body: JSON.stringify({ process: { pid: 'not a number' }, input: { stdin: 'x' } }),
      headers: { ...headers, 'x-access-token': token },
    });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.equal(bad.body.code, 'invalid_argument');
    await sandbox.files.write(marker, 'stays');
    const move = await call('POST', '/e2b/sandbox/filesystem.Filesystem/Move', {
      body: JSON.stringify({ source: marker, destination: { not: 'a path' } }),
      headers: { ...headers, 'x-access-token': token },
    });
    assert.equal(move.status, 400, JSON.stringify(move.body));
    assert.equal(move.body.code, 'invalid_argument');
    assert.equal(await sandbox.files.read(marker), 'stays', 'the malformed message moved nothing');
  });

  test("snapshots and forks: createSnapshot, listSnapshots by sandbox and by name, Sandbox.create from one (its files and a process's memory), fork, deleteSnapshot", async () => {
    await sandbox.files.write('/home/user/snap.txt', 'kept in the snapshot');
    await sandbox.commands.run('sleep 3600', { background: true });
    const snap = await sandbox.createSnapshot({ name: 'e2b-snap' });
    assert.match(snap.snapshotId, /^snap_/);
    assert.deepEqual(snap.names, ['e2b-snap']);
    assert.ok((await sandbox.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId));
    assert.deepEqual((await Sandbox.listSnapshots({ name: 'e2b-snap' }).nextItems()).map((s) => s.snapshotId), [snap.snapshotId]);
    assert.deepEqual(await Sandbox.listSnapshots({ name: 'no-such-snapshot' }).nextItems(), []);
    // Made with allowPublicTraffic false: its ports are private, reached with its trafficAccessToken;
    // with maskRequestHost, its apps get that Host.
    const child = await Sandbox.create(snap.snapshotId, { network: { allowPublicTraffic: false, maskRequestHost: 'app.example.com:${PORT}' }, requestTimeoutMs: 600_000 });
    try {
      assert.notEqual(child.sandboxId, sandbox.sandboxId);
      assert.match(child.trafficAccessToken ?? '', /^avm_pt_/);
      assert.equal(sandbox.trafficAccessToken, undefined, 'a public sandbox has none');
      const app = `import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = chr(10).join(k + ': ' + v for k, v in self.headers.items()).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(('', 8000), H).serve_forever()`;
      await child.commands.run(`python3 -c "${app}"`, { background: true });
      const vmId = (await t.api('GET', `/v1/api/vms/${child.sandboxId}`)).body.vm_id;
      const get = (token?: string) =>
        fetch(server.url, { headers: { 'X-Agentvm-Vm': vmId, 'X-Agentvm-Port': '8000', ...(token ? { 'e2b-traffic-access-token': token } : {}) } });
      let res = await get(child.trafficAccessToken);
      for (let i = 0; res.status === 502 && i < 300; i++) {
        await new Promise((r) => setTimeout(r, 100)); // until the app listens
        res = await get(child.trafficAccessToken);
      }
      assert.equal(res.status, 200, await res.clone().text());
      const seen = (await res.text()).split('\n');
      assert.ok(seen.includes('Host: app.example.com:8000'), `the masked Host: ${seen}`);
      assert.ok(!seen.some((h) => /^(host|e2b-traffic-access-token):/i.test(h) && h !== 'Host: app.example.com:8000'), `one Host, no credential: ${seen}`);
      assert.equal((await get()).status, 401);
      assert.equal((await get('avm_pt_wrong')).status, 401);
      assert.equal(await child.files.read('/home/user/snap.txt'), 'kept in the snapshot');
      assert.equal((await child.commands.run('pgrep -xc sleep')).stdout, '1\n', 'the background process came along in memory');
      await child.files.write('/home/user/snap.txt', 'changed in the child');
      assert.equal(await sandbox.files.read('/home/user/snap.txt'), 'kept in the snapshot', 'the sandboxes are apart');
    } finally {
      await child.kill();
    }
    // A fork: a snapshot of its own, started once, gone after.
    const forks = await sandbox.fork({ requestTimeoutMs: 600_000 });
    assert.equal(forks.length, 1);
    const fork = forks[0];
    assert.ok(fork instanceof Sandbox, String(fork));
    try {
      assert.equal(await fork.files.read('/home/user/snap.txt'), 'kept in the snapshot');
      assert.ok(await sandbox.isRunning(), 'the forked sandbox runs on');
    } finally {
      await fork.kill();
    }
    assert.deepEqual((await sandbox.listSnapshots().nextItems()).map((s) => s.snapshotId), [snap.snapshotId], "the fork's own snapshot is gone");
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
    assert.equal((await call('DELETE', '/e2b/templates/base', { key: e2bKey })).status, 404, 'only snapshots are deleted as templates');
    await assert.rejects(Sandbox.create('snap_NoSuchSnapshot'), /not found/);
  });

  test('a pause keeps the processes: a background command runs on, is listed after the resume, followed again and killed', async () => {
    const handle = await sandbox.commands.run('i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done', { background: true });
    await until('its first tick', async () => handle.stdout.includes('tick 1\n'), 60_000);
    await sandbox.pause();
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId)).state, 'paused');
    const expiry = async () => (await t.api('GET', `/v1/api/vms/${sandbox.sandboxId}`)).body.expires_at;
    assert.equal(await expiry(), null, 'a paused sandbox is kept past its timeout, as E2B keeps it');
    await sandbox.connect({ timeoutMs: 3_600_000 });
    assert.ok(await expiry(), 'its resume sets a new end');
    const listed = (await sandbox.commands.list()).find((p) => p.pid === handle.pid);
    assert.equal(listed?.cmd, '/bin/bash', 'listed after the resume, with its command');
    const again = await sandbox.commands.connect(handle.pid);
    await until('its ticks after the resume', async () => /tick \d+\n/.test(again.stdout), 60_000);
    assert.equal(await sandbox.commands.kill(handle.pid), true);
    await again.wait().catch(() => undefined);
    await until('it is gone', async () => !(await sandbox.commands.list()).some((p) => p.pid === handle.pid), 30_000);
  });

  test('a filesystem-only pause (keepMemory: false) is a stop, and its resume a new boot with the files kept; so is a timeout with autoPauseMemory false', async () => {
    const bootId = async (sb: Sandbox) => (await sb.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim();
    await sandbox.files.write('/home/user/kept.txt', 'kept across a boot');
    const before = await bootId(sandbox);
    await sandbox.pause({ keepMemory: false });
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId)).state, 'paused');
    const vms = (await t.api('GET', '/v1/api/vms')).body as { data: { vm_id: string; status: string }[] };
    assert.ok(vms.data.some((v) => v.status === 'stopped'), 'its VM is stopped, not suspended');
    await sandbox.connect();
    assert.equal(await sandbox.files.read('/home/user/kept.txt'), 'kept across a boot');
    const second = await bootId(sandbox);
    assert.notEqual(second, before, 'a new boot');
    // Paused with its memory, then connected with onResume 'reboot': a new boot too, the files kept.
    await sandbox.pause();
    await Sandbox.connect(sandbox.sandboxId, { onResume: 'reboot' });
    assert.equal(await sandbox.files.read('/home/user/kept.txt'), 'kept across a boot');
    assert.notEqual(await bootId(sandbox), second, "onResume 'reboot' boots afresh");

    // Its boot id read first, then a timeout of a second (read after a short timeout, a busy machine paused it first).
    const short = await Sandbox.create('base', { allowInternetAccess: false, timeoutMs: 600_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } }, requestTimeoutMs: 600_000 });
    const first = await bootId(short);
    await short.setTimeout(1_000);
    await until('the sandbox paused at its timeout', async () => (await Sandbox.getInfo(short.sandboxId)).state === 'paused', 60_000);
    await short.connect({ timeoutMs: 600_000 });
    assert.notEqual(await bootId(short), first, 'its resume is a new boot');
    await short.kill();
  });

  test('setTimeout moves the end; kill destroys the sandbox (and its VM)', async () => {
    await sandbox.setTimeout(1_800_000);
    const info = await Sandbox.getInfo(sandbox.sandboxId);
    const left = info.endAt.getTime() - Date.now();
    assert.ok(left > 1_700_000 && left <= 1_800_000, `${left} ms left`);
    // A command followed while its sandbox is killed: the connection ends, and the SDK, asking /health, says why.
    const running = await sandbox.commands.run('sleep 60', { background: true });
    assert.equal(await Sandbox.kill(sandbox.sandboxId), true);
    const err = (await running.wait().catch((e: Error) => e)) as Error;
    assert.ok(err instanceof TimeoutError, `${err?.constructor?.name}: ${err?.message}`);
    assert.match(err.message, /sandbox was killed or reached its end of life/);
    assert.equal(await Sandbox.kill(sandbox.sandboxId), false, 'gone already');
    await assert.rejects(Sandbox.getInfo(sandbox.sandboxId), /not found/);
  });
});
