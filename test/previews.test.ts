/**
 * Preview URLs on one real microVM (egress none), through a real server: an app of the test's own
 * started in the guest answers on its ports, and the API server routes to them by Host or by the
 * routing headers, over the VM's data channel. Every way in (API key, preview token, the cookie a
 * `?agentvm_token=` sets, a public port), every refusal (no credential: the app never sees it;
 * nothing listening; a stopped VM; bad routes), an event stream whose first event comes before its
 * end, a WebSocket echo, 50 MiB each way, 100 requests at once, a port forward (the CLI's), and failed
 * preview credentials counted by the address's throttle. Needs QEMU and a built guest image
 * (AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import type { RunningServer } from '../src/server.ts';
import { forwardPort } from '../src/cli/previews.ts';
import { apiClient, detached, until, type ApiCall } from './helpers.ts';
import { startVmTestServer, type VmTestServer } from './vmServer.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';

/**
 * The app in the guest: a page, what it has seen (each request's method, path and headers, in a file), an
 * event stream that ends only when told to, an echo of a body, and a WebSocket echo written by hand
 * (the guest has Node and nothing more).
 */
const APP = String.raw`
const http = require('node:http');
const crypto = require('node:crypto');
const fs = require('node:fs');
const seen = (entry) => fs.appendFileSync('/tmp/seen.jsonl', JSON.stringify(entry) + '\n');
let release = null;
let big = null;
function handler(req, res) {
  seen({ method: req.method, url: req.url, headers: req.headers, port: req.socket.localPort });
  if (req.url === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    res.write('data: first\n\n');
    release = () => res.end('data: last\n\n');
    return;
  }
  if (req.url === '/sse-release') { if (release) release(); release = null; return res.end('released'); }
  if (req.url === '/echo') { res.writeHead(200, { 'content-type': 'application/octet-stream' }); return req.pipe(res); }
  if (req.url === '/big') {
    if (!big) big = crypto.randomBytes(50 * 1024 * 1024);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big.length, 'x-sha256': crypto.createHash('sha256').update(big).digest('hex') });
    return res.end(big);
  }
  if (req.url === '/upload') {
    const h = crypto.createHash('sha256');
    let n = 0;
    req.on('data', (d) => { h.update(d); n += d.length; });
    return req.on('end', () => res.end(JSON.stringify({ bytes: n, sha256: h.digest('hex') })));
  }
  res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': 'app=1; Path=/' });
  res.end('<h1>hello from the vm on ' + req.socket.localPort + '</h1>');
}
function upgrade(req, socket) {
  seen({ method: req.method, url: req.url, headers: req.headers, port: req.socket.localPort });
  if (req.url !== '/ws') return socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n');
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  let buf = Buffer.alloc(0);
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 6) {
      const op = buf[0] & 15, len = buf[1] & 127;
      if (len > 125 || buf.length < 6 + len) return;
      const mask = buf.subarray(2, 6), data = Buffer.from(buf.subarray(6, 6 + len));
      for (let i = 0; i < len; i++) data[i] ^= mask[i % 4];
      buf = buf.subarray(6 + len);
      if (op === 8) return socket.end(Buffer.from([0x88, 0]));
      const text = Buffer.from('echo:' + data.toString());
      socket.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
    }
  });
}
for (const port of [8080, 8081]) {
  const s = http.createServer(handler);
  s.on('upgrade', upgrade);
  s.listen(port, '0.0.0.0');
}
`;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

describe('preview URLs of a real microVM', { skip }, () => {
  let t: VmTestServer;
  let server: RunningServer;
  let api: ApiCall;
  let key: string;
  let otherKey: string;
  let vmId: string;
  let label: string;

  /** A request to the API server's address with the Host (and headers) given. */
  const send = (opts: { host?: string; path?: string; method?: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: server.port, path: opts.path ?? '/', method: opts.method ?? 'GET', headers: { ...(opts.host ? { host: opts.host } : {}), ...(opts.headers ?? {}) } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end(opts.body);
    });
  const hostFor = (port: number) => `${port}-${label}.localhost:${server.port}`;
  const exec = (argv: string[]) => server.host.driver!.exec(vmId, { argv }, 60_000);
  /** What the app in the guest has seen, read from inside the guest (no preview involved). */
  const seen = async (): Promise<{ method: string; url: string; headers: Record<string, string>; port: number }[]> =>
    (await exec(['sh', '-c', 'touch /tmp/seen.jsonl; cat /tmp/seen.jsonl'])).stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));

  before(async () => {
    t = await startVmTestServer('previews');
    server = t.server;
    key = t.tenant.api_key;
    otherKey = (await t.admin('POST', '/v1/admin/tenants', { email: 'stranger@example.com' })).body.api_key;
    api = apiClient(server.url, key);
    const created = await api('POST', '/v1/api/vms', { harness: 'opencode', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    vmId = created.body.vm_id;
    label = vmId.toLowerCase().replace(/_/g, '-');
    await until(`${vmId} running`, async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running';
    }, 600_000);
    const wrote = await exec(['sh', '-c', `cat > /tmp/app.js <<'APP_EOF'\n${APP}\nAPP_EOF\n${detached('node /tmp/app.js >/tmp/app.log 2>&1')}`]);
    assert.equal(wrote.exit_code, 0, wrote.stderr);
    // Node's start under emulation, on a busy machine, takes a while.
    await until('the app listening', async () => (await api('GET', `/v1/api/vms/${vmId}/ports`)).body?.data?.filter((p: { port: number }) => p.port >= 8080 && p.port <= 8081).length === 2, 240_000);
  });

  after(async () => {
    await t?.close();
  });

  test("a VM's preview_label is its hosts' label, and GET /v1/api/vms/{id} takes it for the id", async () => {
    const byId = (await api('GET', `/v1/api/vms/${vmId}`)).body;
    assert.equal(byId.preview_label, label);
    const byLabel = await api('GET', `/v1/api/vms/${label}`);
    assert.equal(byLabel.status, 200, JSON.stringify(byLabel.body));
    assert.equal(byLabel.body.vm_id, vmId);
    assert.equal((await api('GET', `/v1/api/vms/${label}x`)).status, 404);
  });

  test('listVMPorts: what listens in the guest, its process, public flag and URL', async () => {
    const r = await api('GET', `/v1/api/vms/${vmId}/ports`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const ports = r.body.data.filter((p: { port: number }) => p.port === 8080 || p.port === 8081);
    assert.deepEqual(ports, [
      { port: 8080, process: 'node', public: false, url: `http://8080-${label}.localhost:${server.port}/` },
      { port: 8081, process: 'node', public: false, url: `http://8081-${label}.localhost:${server.port}/` },
    ]);
    assert.equal((await apiClient(server.url, otherKey)('GET', `/v1/api/vms/${vmId}/ports`)).status, 404);
  });

  test('no credential: 401 unauthorized (JSON or HTML by Accept) and the app never sees the request', async () => {
    const before = (await seen()).length;
    const json = await send({ host: hostFor(8080), path: '/secret-1' });
    assert.equal(json.status, 401);
    assert.deepEqual(JSON.parse(json.body), { error: 'unauthorized', message: '' });
    const html = await send({ host: hostFor(8080), path: '/secret-2', headers: { accept: 'text/html' } });
    assert.equal(html.status, 401);
    assert.match(html.headers['content-type']!, /text\/html/);
    assert.match(html.body, /unauthorized/);
    assert.equal((await send({ host: hostFor(8080), path: '/secret-3', headers: { authorization: `Bearer ${otherKey}` } })).status, 401, "another tenant's key");
    assert.equal((await send({ host: hostFor(8080), path: '/secret-4', headers: { 'x-agentvm-preview-token': 'avm_pt_wrong' } })).status, 401);
    const after = await seen();
    assert.equal(after.length, before, `the app saw ${JSON.stringify(after.slice(before).map((s) => s.url))}`);
  });

  test('the API key by Host or by routing headers: the app answers and sees none of our headers', async () => {
    const r = await send({ host: hostFor(8080), path: '/page?x=1', headers: { authorization: `Bearer ${key}`, cookie: 'mine=1' } });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, '<h1>hello from the vm on 8080</h1>');
    assert.equal(r.headers['set-cookie']?.[0], 'app=1; Path=/');
    const viaHeaders = await send({ path: '/by-headers', headers: { authorization: `Bearer ${key}`, 'x-agentvm-vm': vmId, 'x-agentvm-port': '8081' } });
    assert.equal(viaHeaders.status, 200, viaHeaders.body);
    assert.equal(viaHeaders.body, '<h1>hello from the vm on 8081</h1>');
    // The tenant's key in E2B's format lets the request in too, and is stripped as well; an app's own Bearer passes.
    const e2bKey = (await api('POST', '/v1/api/keys', { scope: 'readwrite', format: 'e2b' })).body.key as string;
    assert.match(e2bKey, /^e2b_[0-9a-f]{40}$/);
    assert.equal((await send({ host: hostFor(8080), path: '/e2b-key', headers: { authorization: `Bearer ${e2bKey}` } })).status, 200);
    const s = await seen();
    assert.equal(s.find((x) => x.url === '/e2b-key')!.headers.authorization, undefined, 'an E2B-format key of ours never reaches the app');
    const page = s.find((x) => x.url === '/page?x=1')!;
    assert.equal(page.headers.authorization, undefined);
    assert.equal(page.headers.cookie, 'mine=1');
    assert.equal(page.headers.host, hostFor(8080));
    const byHeaders = s.find((x) => x.url === '/by-headers')!;
    assert.equal(byHeaders.port, 8081);
    assert.equal(byHeaders.headers['x-agentvm-vm'], undefined);
    assert.equal(byHeaders.headers['x-agentvm-port'], undefined);
  });

  test('the preview token: by header, and by ?agentvm_token= as a cookie for that host (then a redirect); a rotation kills the old one', async () => {
    const first = (await api('POST', `/v1/api/vms/${vmId}/preview-token`)).body.token as string;
    const rotated = await api('POST', `/v1/api/vms/${vmId}/preview-token`);
    assert.equal(rotated.status, 200);
    const token = rotated.body.token as string;
    assert.match(token, /^avm_pt_/);
    assert.equal((await send({ host: hostFor(8080), headers: { 'x-agentvm-preview-token': first } })).status, 401, 'the old token is dead');
    const byHeader = await send({ host: hostFor(8080), path: '/token-header', headers: { 'x-agentvm-preview-token': token } });
    assert.equal(byHeader.status, 200, byHeader.body);
    // E2B's name for it (its SDKs' trafficAccessToken).
    const byE2bHeader = await send({ host: hostFor(8080), path: '/e2b-token-header', headers: { 'e2b-traffic-access-token': token } });
    assert.equal(byE2bHeader.status, 200, byE2bHeader.body);
    const redirect = await send({ host: hostFor(8080), path: `/deep/page?a=1&agentvm_token=${encodeURIComponent(token)}` });
    assert.equal(redirect.status, 302, redirect.body);
    assert.equal(redirect.headers.location, '/deep/page?a=1');
    const cookie = redirect.headers['set-cookie']![0];
    assert.match(cookie, /^agentvm_preview_token=avm_pt_[^;]+; Path=\/; HttpOnly; SameSite=Lax/);
    assert.doesNotMatch(cookie, /Domain=/i, 'a cookie for that one host');
    const withCookie = await send({ host: hostFor(8080), path: '/deep/page?a=1', headers: { cookie: `${cookie.split(';')[0]}; other=2` } });
    assert.equal(withCookie.status, 200, withCookie.body);
    assert.equal((await send({ host: hostFor(8080), path: `/?agentvm_token=avm_pt_wrong` })).status, 401);
    // A cookie whose token was rotated since: 401, and the cookie is cleared (a browser stops sending it).
    const stale = await send({ host: hostFor(8080), headers: { cookie: `agentvm_preview_token=${first}` } });
    assert.equal(stale.status, 401);
    assert.match(stale.headers['set-cookie']?.[0] ?? '', /^agentvm_preview_token=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax/);
    const s = await seen();
    const deep = s.find((x) => x.url === '/deep/page?a=1')!;
    assert.equal(deep.headers.cookie, 'other=2');
    assert.equal(s.find((x) => x.url === '/token-header')!.headers['x-agentvm-preview-token'], undefined);
    assert.equal(s.find((x) => x.url === '/e2b-token-header')!.headers['e2b-traffic-access-token'], undefined);
    assert.ok(!s.some((x) => x.url.includes('agentvm_token')), 'the token never reaches the app');
  });

  test('a public port answers without a credential; private again, it does not', async () => {
    assert.equal((await send({ host: hostFor(8081) })).status, 401);
    const set = await api('PUT', `/v1/api/vms/${vmId}/ports/8081`, { public: true });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual(set.body, { port: 8081, process: 'node', public: true, url: `http://8081-${label}.localhost:${server.port}/` });
    const open = await send({ host: hostFor(8081), path: '/public' });
    assert.equal(open.status, 200, open.body);
    assert.equal((await send({ host: hostFor(8080) })).status, 401, 'the other port stays private');
    assert.equal((await api('GET', `/v1/api/vms/${vmId}/ports`)).body.data.find((p: { port: number }) => p.port === 8081).public, true);
    assert.equal((await api('PUT', `/v1/api/vms/${vmId}/ports/22`, { public: true })).status, 400);
    assert.equal((await api('PUT', `/v1/api/vms/${vmId}/ports/8081`, { public: false })).body.public, false);
    assert.equal((await send({ host: hostFor(8081) })).status, 401);
  });

  test('a body both ways, and an event stream whose first event arrives before it ends', async () => {
    const body = 'x'.repeat(300_000);
    const echo = await send({ host: hostFor(8080), path: '/echo', method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, body });
    assert.equal(echo.status, 200);
    assert.equal(echo.body, body);
    const events: string[] = [];
    const ended = new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: server.port, path: '/sse', headers: { host: hostFor(8080), authorization: `Bearer ${key}` } }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => events.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, type: res.headers['content-type'] }));
        })
        .on('error', reject);
    });
    await until('the first event', async () => events.join('').includes('data: first'), 30_000);
    assert.ok(!events.join('').includes('data: last'), 'the stream has not ended yet');
    assert.equal((await send({ host: hostFor(8080), path: '/sse-release', headers: { authorization: `Bearer ${key}` } })).body, 'released');
    const r = await ended;
    assert.equal(r.status, 200);
    assert.equal(r.type, 'text/event-stream');
    assert.equal(events.join(''), 'data: first\n\ndata: last\n\n');
  });

  test('a WebSocket echo through the preview; without a credential the upgrade is refused; a refused upgrade is the app\'s answer', async () => {
    const url = `ws://127.0.0.1:${server.port}/ws`;
    const ws = new WebSocket(url, { headers: { host: hostFor(8080), authorization: `Bearer ${key}` } });
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject), ws.once('unexpected-response', (_q, res) => reject(new Error(`refused ${res.statusCode}`)))));
    const replies: string[] = [];
    ws.on('message', (d) => replies.push(d.toString()));
    ws.send('one');
    ws.send('two');
    await until('two echoes', async () => replies.length === 2, 30_000);
    assert.deepEqual(replies, ['echo:one', 'echo:two']);
    ws.close();
    const status = (h: Record<string, string>, p = '/ws') =>
      new Promise<number>((resolve, reject) => {
        const w = new WebSocket(`ws://127.0.0.1:${server.port}${p}`, { headers: { host: hostFor(8080), ...h } });
        w.once('unexpected-response', (_q, res) => (resolve(res.statusCode!), res.resume()));
        w.once('open', () => (w.close(), resolve(101)));
        w.once('error', reject);
      });
    assert.equal(await status({}), 401);
    assert.equal(await status({ authorization: `Bearer ${key}` }, '/not-ws'), 403, "the app's own refusal");
  });

  test('50 MiB down and up through the preview, hashes kept', { timeout: 10 * 60_000 }, async () => {
    const MiB50 = 50 * 1024 * 1024;
    const down = await new Promise<{ status: number; bytes: number; sha256: string; said: string }>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: server.port, path: '/big', headers: { host: hostFor(8080), authorization: `Bearer ${key}` } }, (res) => {
          const h = createHash('sha256');
          let bytes = 0;
          res.on('data', (d: Buffer) => (h.update(d), (bytes += d.length)));
          res.on('end', () => resolve({ status: res.statusCode!, bytes, sha256: h.digest('hex'), said: String(res.headers['x-sha256']) }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    assert.equal(down.status, 200);
    assert.equal(down.bytes, MiB50);
    assert.equal(down.sha256, down.said, 'the bytes the app sent');
    const data = randomBytes(MiB50);
    const up = await send({ host: hostFor(8080), path: '/upload', method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: data });
    assert.equal(up.status, 200, up.body);
    assert.deepEqual(JSON.parse(up.body), { bytes: MiB50, sha256: createHash('sha256').update(data).digest('hex') });
  });

  test('100 requests at once to one port: each answered, each seen once by the app', { timeout: 5 * 60_000 }, async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => send({ host: hostFor(8080), path: `/parallel-${i}`, headers: { authorization: `Bearer ${key}` } })),
    );
    for (const a of answers) {
      assert.equal(a.status, 200, a.body);
      assert.equal(a.body, '<h1>hello from the vm on 8080</h1>');
    }
    const urls = (await seen()).map((x) => x.url).filter((u) => u.startsWith('/parallel-'));
    assert.deepEqual(urls.sort(), Array.from({ length: 100 }, (_, i) => `/parallel-${i}`).sort());
  });

  test('a port forward (the CLI\'s): a local port reaches the app over the API\'s WebSocket; refusals close the connection', async () => {
    const get = (port: number, p: string) =>
      new Promise<Answer>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path: p }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
          })
          .on('error', reject);
      });
    const fwd = await forwardPort({ baseUrl: server.url, key, vmId, port: 8081, local: 0, bind: '127.0.0.1' });
    try {
      const [a, b] = await Promise.all([get(fwd.port, '/forwarded-1'), get(fwd.port, '/forwarded-2')]);
      assert.equal(a.status, 200, a.body);
      assert.equal(a.body, '<h1>hello from the vm on 8081</h1>');
      assert.equal(b.body, '<h1>hello from the vm on 8081</h1>');
      const s = (await seen()).find((x) => x.url === '/forwarded-1')!;
      assert.equal(s.port, 8081);
      assert.equal(s.headers.host, `127.0.0.1:${fwd.port}`, 'the bytes as the local client sent them');
    } finally {
      await fwd.close();
    }
    const refusals: string[] = [];
    for (const [k, port] of [[otherKey, 8081], [key, 9999]] as const) {
      const bad = await forwardPort({ baseUrl: server.url, key: k, vmId, port, local: 0, bind: '127.0.0.1', refused: (m) => refusals.push(m) });
      await assert.rejects(get(bad.port, '/refused'));
      await bad.close();
    }
    assert.equal(refusals.length, 2);
    assert.equal(refusals[0], 'unauthorized', "another tenant's key");
    assert.match(refusals[1], /^port_closed: nothing listens on port 9999/);
  });

  test('bad routes: nothing listening is 502 port_closed; unknown VM 404; a malformed Host or a port out of range 400', async () => {
    const closed = await send({ host: hostFor(9999), headers: { authorization: `Bearer ${key}` } });
    assert.equal(closed.status, 502);
    assert.equal(JSON.parse(closed.body).error, 'port_closed');
    assert.match(JSON.parse(closed.body).message, /9999/);
    const page = await send({ host: hostFor(9999), headers: { authorization: `Bearer ${key}`, accept: 'text/html' } });
    assert.match(page.body, /port_closed/);
    assert.equal((await send({ host: `8080-vm-nosuchvm.localhost:${server.port}`, headers: { authorization: `Bearer ${key}` } })).status, 404);
    assert.equal((await send({ host: `nonsense.localhost:${server.port}`, headers: { authorization: `Bearer ${key}` } })).status, 400);
    assert.equal((await send({ host: hostFor(22), headers: { authorization: `Bearer ${key}` } })).status, 400);
    assert.equal((await send({ headers: { authorization: `Bearer ${key}`, 'x-agentvm-vm': vmId, 'x-agentvm-port': '70000' } })).status, 400);
    // The API itself is untouched.
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).status, 200);
  });

  test('a suspended VM: 409 vm_not_running; with auto_resume a request starts it, waits for its port and is served', { timeout: 5 * 60_000 }, async () => {
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).body.auto_resume, false, 'off by default');
    // An app suspended while it starts: it listens 3 s of the guest's time from now, after the wake.
    const late = `setTimeout(() => require('node:http').createServer((q, s) => s.end('late')).listen(8082), 3000);`;
    const started = await exec(['sh', '-c', `echo "${late}" > /tmp/late.js && ${detached('node /tmp/late.js >/tmp/late.log 2>&1')}`]);
    assert.equal(started.exit_code, 0, started.stderr);
    const suspend = await api('POST', `/v1/api/vms/${vmId}/suspend`);
    assert.ok(suspend.status < 300, JSON.stringify(suspend.body));
    await until('suspended', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'suspended');
    const refused = await send({ host: hostFor(8080), headers: { authorization: `Bearer ${key}` } });
    assert.equal(refused.status, 409, refused.body);
    assert.equal(JSON.parse(refused.body).error, 'vm_not_running');
    const patched = await api('PATCH', `/v1/api/vms/${vmId}`, { auto_resume: true });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.auto_resume, true);
    // The request that wakes the VM waits for its port to listen (within the wake's 30 s).
    const woke = await send({ host: hostFor(8082), path: '/woke', headers: { authorization: `Bearer ${key}` } });
    assert.equal(woke.status, 200, woke.body);
    assert.equal(woke.body, 'late');
    const page = await send({ host: hostFor(8080), headers: { authorization: `Bearer ${key}` } });
    assert.equal(page.body, '<h1>hello from the vm on 8080</h1>');
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).body.status, 'running');
    // A request that finds the VM on its way to running (woken by another request, or started through the API) waits for it too.
    assert.ok((await api('POST', `/v1/api/vms/${vmId}/suspend`)).status < 300);
    await until('suspended again', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'suspended');
    const start = await api('POST', `/v1/api/vms/${vmId}/start`);
    assert.ok(start.status < 300 && start.body.status === 'starting', JSON.stringify(start.body));
    const during = await send({ host: hostFor(8080), path: '/while-starting', headers: { authorization: `Bearer ${key}` } });
    assert.equal(during.status, 200, during.body);
  });

  test('a stopped VM: 409 vm_not_running', { timeout: 5 * 60_000 }, async () => {
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/stop`)).status, 200);
    await until('stopped', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'stopped');
    const r = await send({ host: hostFor(8080), headers: { authorization: `Bearer ${key}` } });
    assert.equal(r.status, 409, r.body);
    assert.equal(JSON.parse(r.body).error, 'vm_not_running');
  });

  test('failed preview credentials count against the address: after 30, even the right key is refused with 429, and the API too', async () => {
    // Earlier tests' wrong credentials may be in the address's window already: guesses until the 429, 30 at most.
    const statuses: number[] = [];
    while (statuses.length <= 30 && statuses.at(-1) !== 429) {
      statuses.push((await send({ host: hostFor(8080), path: `/guess`, headers: { 'x-agentvm-preview-token': `avm_pt_guess${statuses.length}` } })).status);
    }
    assert.equal(statuses.at(-1), 429, `statuses: ${statuses.join(' ')}`);
    assert.ok(statuses.slice(0, -1).every((x) => x === 401));
    const refused = await send({ host: hostFor(8080), headers: { authorization: `Bearer ${key}` } });
    assert.equal(refused.status, 429, refused.body);
    assert.equal(JSON.parse(refused.body).error, 'rate_limited');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).status, 429, "the API's throttle is the same");
  });
});
