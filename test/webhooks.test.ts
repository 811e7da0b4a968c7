/**
 * Webhooks: URL and event-type checks, the secret shown once, signed deliveries retried until a 2xx
 * (a receiver on loopback, allowed as the operator would with AGENTVM_WEBHOOK_ALLOW_HOSTS), the
 * delivery log, no delivery to a private address, and deliveries that survive a kill -9 of the server.
 */
import { Agent as HttpAgent, get as httpGet } from 'node:http';
import { describe, test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createHmac, timingSafeEqual } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { backends, createTestApp, endServer, spawnServer, until, type TestApp } from './helpers.ts';
import { WebhookSender, retryDelayMs, signatureHeader } from '../src/jobs/webhookSender.ts';
import { createLogger } from '../src/log.ts';
import { systemClock } from '../src/domain/clock.ts';

const quiet = createLogger('error', new Writable({ write: (_c, _e, cb) => cb() }));

interface Hit {
  body: string;
  signature: string;
  eventId: string;
}

/** A receiver on loopback that answers each request with the next status of `plan` (the last one repeats). */
async function receiver(plan: number[]): Promise<{ url: string; hits: Hit[]; plan: number[]; close: () => Promise<void>; server: Server }> {
  const hits: Hit[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      hits.push({ body, signature: String(req.headers['agentvm-signature'] ?? ''), eventId: String(req.headers['agentvm-event-id'] ?? '') });
      const status = plan[Math.min(hits.length - 1, plan.length - 1)];
      res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/hooks`, hits, plan, server, close: () => new Promise((r) => server.close(() => r())) };
}

/** What a receiver does: checks the signature over "<t>.<body>" with the secret. */
function verify(secret: string, header: string, body: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const want = createHmac('sha256', secret).update(`${m[1]}.${body}`).digest();
  return timingSafeEqual(want, Buffer.from(m[2], 'hex'));
}

describe('webhook signatures and retry delays', () => {
  test('the signature is the hex HMAC-SHA256 of "<t>.<body>"', () => {
    const header = signatureHeader('whsec_test', '{"a":1}', 1_700_000_000);
    assert.equal(header, `t=1700000000,v1=${createHmac('sha256', 'whsec_test').update('1700000000.{"a":1}').digest('hex')}`);
    assert.ok(verify('whsec_test', header, '{"a":1}'));
    assert.ok(!verify('whsec_other', header, '{"a":1}'));
    assert.ok(!verify('whsec_test', header, '{"a":2}'));
  });

  test('retries back off exponentially with jitter, up to a cap', () => {
    assert.equal(retryDelayMs(1, 1000, 60_000, () => 0.5), 1000);
    assert.equal(retryDelayMs(4, 1000, 60_000, () => 0.5), 8000);
    assert.equal(retryDelayMs(30, 1000, 60_000, () => 0.5), 60_000);
    assert.equal(retryDelayMs(3, 1000, 60_000, () => 0), 2000);
    assert.equal(retryDelayMs(3, 1000, 60_000, () => 0.999), 5996);
  });
});

for (const backend of backends()) {
  describe(`webhooks on ${backend.name}`, () => {
    let t: TestApp;
    let sender: WebhookSender | null = null;
    beforeEach(async () => {
      t = await createTestApp(backend, { webhookAllowHosts: new Set(['127.0.0.1']) });
    });
    afterEach(async () => {
      await sender?.stop();
      sender = null;
      await t.close();
    });
    const startSender = (o: { retryBaseMs?: number; timeoutMs?: number; allowHosts?: Set<string> } = {}) => {
      sender = new WebhookSender({ db: t.db, clock: systemClock, log: quiet, allowHosts: o.allowHosts ?? new Set(['127.0.0.1']), retryBaseMs: o.retryBaseMs ?? 100, timeoutMs: o.timeoutMs, pollMs: 50 });
      sender.start();
    };

    test('create answers the secret once; list and delete never show it; bad URLs and event types are 400 naming the field', async () => {
      const tenant = await t.tenant();
      const created = await t.request('POST', '/v1/api/webhooks', { key: tenant.key, body: { url: 'https://hooks.example.com/agentvm', events: ['vm.stopped', 'run.finished'] } });
      assert.equal(created.status, 201, created.text);
      assert.match(created.body.webhook_id, /^wh_/);
      assert.match(created.body.secret, /^whsec_[0-9A-Za-z]{40}$/);
      const list = await t.request('GET', '/v1/api/webhooks', { key: tenant.key });
      assert.deepEqual(list.body.data, [{ webhook_id: created.body.webhook_id, url: 'https://hooks.example.com/agentvm', events: ['vm.stopped', 'run.finished'], created_at: created.body.created_at }]);
      assert.ok(!list.text.includes(created.body.secret));
      const bad: Array<[unknown, string]> = [
        [{ url: 'http://hooks.example.com/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'not a url', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://127.0.0.2/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://10.1.2.3/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://169.254.169.254/latest', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://[::1]/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://[::ffff:192.168.0.1]/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://localhost/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://user:pw@hooks.example.com/x', events: ['vm.stopped'] }, 'url'],
        [{ url: 'https://hooks.example.com/x', events: ['vm.exploded'] }, 'events.0'],
        [{ url: 'https://hooks.example.com/x', events: ['vm.stopped', 'nope'] }, 'events.1'],
        [{ url: 'https://hooks.example.com/x', events: [] }, 'events'],
        [{ url: 'https://hooks.example.com/x' }, 'events'],
        [{ url: 'https://hooks.example.com/x', events: ['vm.stopped'], secret: 'mine' }, 'secret'],
      ];
      for (const [body, field] of bad) {
        const res = await t.request('POST', '/v1/api/webhooks', { key: tenant.key, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.ok(res.body.message.startsWith(`${field}:`), `${JSON.stringify(body)}: ${res.body.message}`);
      }
      assert.equal((await t.request('GET', '/v1/api/webhooks', { key: tenant.key })).body.data.length, 1, 'a refused create adds nothing');
      const other = await t.tenant();
      assert.equal((await t.request('DELETE', `/v1/api/webhooks/${created.body.webhook_id}`, { key: other.key })).status, 404);
      const deleted = await t.request('DELETE', `/v1/api/webhooks/${created.body.webhook_id}`, { key: tenant.key });
      assert.equal(deleted.status, 200);
      assert.equal(deleted.body.secret, undefined);
      assert.equal((await t.request('GET', '/v1/api/webhooks', { key: tenant.key })).body.data.length, 0);
    });

    test('a receiver that answers 500 twice then 200 gets the event three times, same event_id, each signed; the log says so', async () => {
      const r = await receiver([500, 500, 200]);
      try {
        const tenant = await t.tenant();
        const hook = (await t.request('POST', '/v1/api/webhooks', { key: tenant.key, body: { url: r.url, events: ['key.issued'] } })).body;
        startSender({ retryBaseMs: 100 });
        const issued = await t.request('POST', '/v1/api/keys', { key: tenant.key, body: { label: 'hooked' } });
        await until('three attempts', async () => r.hits.length >= 3, 20_000);
        await new Promise((res) => setTimeout(res, 500));
        assert.equal(r.hits.length, 3, 'a 2xx ends the retries');
        const event = JSON.parse(r.hits[0].body);
        assert.equal(event.type, 'key.issued');
        assert.equal(event.data.key_id, issued.body.key_id);
        assert.match(event.event_id, /^evt_/);
        for (const hit of r.hits) {
          assert.equal(hit.body, r.hits[0].body, 'the same body at every attempt');
          assert.equal(hit.eventId, event.event_id);
          assert.ok(verify(hook.secret, hit.signature, hit.body), `signature ${hit.signature}`);
        }
        const feed = (await t.request('GET', '/v1/api/events', { key: tenant.key })).body.data;
        assert.deepEqual(feed.find((e: any) => e.event_id === event.event_id), event, 'the delivery is the event of the feed');
        const log = await t.request('GET', `/v1/api/webhooks/${hook.webhook_id}/deliveries`, { key: tenant.key });
        assert.equal(log.status, 200, log.text);
        assert.equal(log.body.data.length, 1);
        const d = log.body.data[0];
        assert.equal(d.event_id, event.event_id);
        assert.equal(d.status, 'delivered');
        assert.equal(d.attempts, 3);
        assert.equal(d.last_status_code, 200);
        assert.equal(d.next_attempt_at, null);
        assert.ok(d.delivered_at);
        const other = await t.tenant();
        assert.equal((await t.request('GET', `/v1/api/webhooks/${hook.webhook_id}/deliveries`, { key: other.key })).status, 404);
      } finally {
        await r.close();
      }
    });

    test('only the types a webhook asked for are sent; a host not allowed is refused at delivery by its resolved address', async () => {
      const r = await receiver([200]);
      try {
        const tenant = await t.tenant();
        const hook = (await t.request('POST', '/v1/api/webhooks', { key: tenant.key, body: { url: r.url.replace('http:', 'https:'), events: ['key.revoked'] } })).body;
        // The sender's operator did not allow 127.0.0.1: the URL was accepted by the API (allowed there), refused when sent.
        startSender({ allowHosts: new Set() });
        const issued = await t.request('POST', '/v1/api/keys', { key: tenant.key, body: {} });
        await t.request('DELETE', `/v1/api/keys/${issued.body.key_id}`, { key: tenant.key });
        const log = await until('an attempt', async () => {
          const page = (await t.request('GET', `/v1/api/webhooks/${hook.webhook_id}/deliveries`, { key: tenant.key })).body;
          return page.data[0]?.attempts >= 1 ? page : undefined;
        }, 10_000);
        assert.equal(log.data.length, 1, 'key.issued was not asked for');
        assert.equal(log.data[0].event_type, 'key.revoked');
        assert.equal(log.data[0].status, 'pending');
        assert.match(log.data[0].last_error, /loopback address: refused/);
        assert.equal(r.hits.length, 0, 'nothing reached the receiver');
      } finally {
        await r.close();
      }
    });

    test('a receiver that never answers costs one timeout per attempt, and the API meanwhile answers as fast as ever', async () => {
      const hang = createServer(() => undefined);
      await new Promise<void>((res) => hang.listen(0, '127.0.0.1', res));
      try {
        const tenant = await t.tenant();
        const url = `http://127.0.0.1:${(hang.address() as { port: number }).port}/`;
        const hook = (await t.request('POST', '/v1/api/webhooks', { key: tenant.key, body: { url, events: ['key.issued'] } })).body;
        startSender({ timeoutMs: 300, retryBaseMs: 60_000 });
        for (let i = 0; i < 5; i++) await t.request('POST', '/v1/api/keys', { key: tenant.key, body: {} });
        const started = performance.now();
        await t.request('GET', '/v1/api/whoami', { key: tenant.key });
        assert.ok(performance.now() - started < 200, 'whoami is not held up by the deliveries');
        const log = await until('five timed-out attempts', async () => {
          const page = (await t.request('GET', `/v1/api/webhooks/${hook.webhook_id}/deliveries`, { key: tenant.key })).body;
          return page.data.filter((d: any) => d.attempts === 1).length === 5 ? page : undefined;
        }, 20_000);
        for (const d of log.data) {
          assert.equal(d.status, 'pending');
          assert.equal(d.last_status_code, null);
          assert.match(d.last_error, /no answer within 300 ms/);
        }
      } finally {
        hang.closeAllConnections();
        await new Promise((res) => hang.close(res));
      }
    });
  });
}

describe('webhook deliveries survive a kill -9 of the server', () => {
  let dataDir: string;
  let proc: ChildProcess | null = null;
  const ADMIN = 'avm_admin_webhooktestwebhooktestwebhooktest1';

  async function startServer(): Promise<string> {
    let url: string;
    ({ proc, url } = await spawnServer(dataDir, {
      AGENTVM_ADMIN_TOKEN: ADMIN,
      AGENTVM_IMAGE_DIR: path.join(dataDir, 'no-images'),
      AGENTVM_IMAGE_BUILD: 'off',
      AGENTVM_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      AGENTVM_WEBHOOK_RETRY_BASE_MS: '300',
      AGENTVM_LOG_LEVEL: 'info',
    }));
    return url;
  }

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-webhooks-kill-'));
  });
  after(async () => {
    await endServer(proc);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('events whose deliveries are pending when the server is killed are delivered after its restart', { timeout: 180_000 }, async () => {
    const r = await receiver([503]);
    try {
      let url = await startServer();
      const call = async (method: string, p: string, key: string, body?: unknown) => {
        const res = await fetch(`${url}${p}`, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
        return { status: res.status, body: await res.json() };
      };
      // Idle connections are kept a minute, not Node's 5 s (a keep-alive client reusing one as it is dropped loses its request).
      const keepAlive = await new Promise<string | undefined>((resolve, reject) =>
        httpGet(`${url}/healthz`, { agent: new HttpAgent({ keepAlive: true }) }, (res) => (res.resume(), resolve(String(res.headers['keep-alive'])))).on('error', reject),
      );
      assert.equal(keepAlive, 'timeout=65');
      const tenant = (await call('POST', '/v1/admin/tenants', ADMIN, { email: 'hooks@example.com' })).body;
      const hook = (await call('POST', '/v1/api/webhooks', tenant.api_key, { url: r.url, events: ['key.issued'] })).body;
      const keyIds: string[] = [];
      for (let i = 0; i < 3; i++) keyIds.push((await call('POST', '/v1/api/keys', tenant.api_key, { label: `k${i}` })).body.key_id);
      await until('each event tried once', async () => new Set(r.hits.map((h) => h.eventId)).size === 3, 30_000);

      const gone = new Promise((res) => proc!.once('exit', res));
      proc!.kill('SIGKILL');
      await gone;
      r.plan.splice(0, r.plan.length, 200);
      const before = r.hits.length;

      url = await startServer();
      await until('every event delivered after the restart', async () => {
        const log = (await call('GET', `/v1/api/webhooks/${hook.webhook_id}/deliveries`, tenant.api_key)).body;
        return log.data.length === 3 && log.data.every((d: any) => d.status === 'delivered');
      }, 60_000);
      const delivered = r.hits.slice(before);
      const keysSeen = new Set(delivered.map((h) => JSON.parse(h.body).data.key_id));
      for (const id of keyIds) assert.ok(keysSeen.has(id), `the key.issued of ${id} was delivered`);
      for (const hit of delivered) assert.ok(verify(hook.secret, hit.signature, hit.body));
    } finally {
      await r.close();
    }
  });
});
