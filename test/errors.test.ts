import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import { CUSTOMER_OPERATIONS } from '../src/api/routes.ts';

for (const backend of backends()) {
  describe(`errors on ${backend.name}`, () => {
    let t: TestApp;
    let key: string;
    before(async () => {
      t = await createTestApp(backend, { rateLimit: { perSecond: 1, burst: 1000 } });
      key = (await t.tenant({ card: '4242' })).key;
    });
    after(() => t.close());

    test('400 invalid_request names the field: wrong value, wrong type, unknown field, malformed JSON', async () => {
      const cases: [unknown, RegExp][] = [
        [{ plan: 'gold' }, /^plan: /],
        [{ plan: 5 }, /^plan: /],
        [{ cycle: 'weekly' }, /^cycle: /],
        [{ tier: 'free' }, /^tier: /],
        [{ harness: 'nope' }, /^harness: /],
        [{ count: 0 }, /^count: /],
        [{ count: 21, tier: 'spot' }, /^count: /],
        [{ count: 1.5, tier: 'spot' }, /^count: /],
        [{ count: 3, tier: 'ondemand' }, /^count: /],
        [{ count: 3 }, /^count: /],
        [{ plan: 'pro', tier: 'spot' }, /^tier: /],
        [{ colour: 'red' }, /^colour: unknown field/],
        [[], /^body: /],
        ['x', /^body: /],
      ];
      for (const [body, message] of cases) {
        const res = await t.request('POST', '/v1/api/vms', { key, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'invalid_request');
        assert.match(res.body.message, message, JSON.stringify(body));
      }
      const malformed = await t.request('POST', '/v1/api/vms', { key, raw: '{"plan":', headers: { 'content-type': 'application/json' } });
      assert.equal(malformed.status, 400);
      assert.match(malformed.body.message, /malformed JSON/);
      const missing = await t.request('POST', '/v1/api/vms', { key });
      assert.equal(missing.status, 400);
      assert.match(missing.body.message, /^body: /);
      const query = await t.request('GET', '/v1/api/templates?limit=0', { key });
      assert.equal(query.status, 400);
      assert.match(query.body.message, /^limit: /);
      for (const q of ['limit=101', 'offset=-1', 'sort=hot', 'limit=abc', 'page=2']) {
        const res = await t.request('GET', `/v1/api/templates?${q}`, { key });
        assert.equal(res.status, 400, q);
        assert.match(res.body.message, new RegExp(`^${q.split('=')[0]}: `));
      }
      const label = await t.request('POST', '/v1/api/keys', { key, body: { label: 'x'.repeat(101) } });
      assert.equal(label.status, 400);
      assert.match(label.body.message, /^label: /);
    });

    test('404 for unknown paths and ids, 405 with Allow for known paths', async () => {
      const unknown = await t.request('GET', '/v1/api/nothing', { key });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error, 'not_found');
      const root = await t.request('GET', '/');
      assert.equal(root.status, 404);
      assert.match(root.headers.get('content-type') ?? '', /application\/json/);
      const harness = await t.request('GET', '/v1/api/harnesses/nope', { key });
      assert.equal(harness.status, 404);
      const put = await t.request('PUT', '/v1/api/whoami', { key });
      assert.equal(put.status, 405);
      assert.equal(put.body.error, 'method_not_allowed');
      assert.equal(put.headers.get('allow'), 'GET, HEAD');
      const vms = await t.request('DELETE', '/v1/api/vms', { key });
      assert.equal(vms.headers.get('allow'), 'GET, HEAD, POST');
    });

    test('every customer operation: 401 without a key, 404 for an unknown id, 415 for a body that is not JSON', async () => {
      // The smallest valid body of each operation that has one, so that the id is what is wrong.
      const VALID: Record<string, unknown> = { runVMTask: { task: 'x' }, setVMSecrets: { A: 'b' }, setVMEgress: { mode: 'none', allow: [] }, setVMPort: { public: true } };
      // And of each that has a required query.
      const QUERY: Record<string, string> = { readVMFile: '?path=x', writeVMFile: '?path=x' };
      const ops = CUSTOMER_OPERATIONS.filter((o) => o.audience === 'customer');
      assert.ok(ops.length >= 20);
      for (const op of ops) {
        const method = op.method.toUpperCase();
        const path = op.path.replace(/\{[^}]+\}/g, 'unknown_0123456789') + (QUERY[op.operationId] ?? '');
        const body = op.body ? (VALID[op.operationId] ?? {}) : undefined;
        const anonymous = await t.request(method, path, { body });
        assert.equal(anonymous.status, 401, op.operationId);
        assert.deepEqual(anonymous.body, { error: 'unauthorized', message: '' }, op.operationId);
        if (path.split('?')[0] !== op.path) {
          const unknown = await t.request(method, path, { key, body });
          assert.equal(unknown.status, 404, `${op.operationId}: ${unknown.text}`);
          assert.equal(unknown.body.error, 'not_found', op.operationId);
        }
        if (op.body || op.binaryBody) {
          const text = await t.request(method, path, { key, raw: 'x=1', headers: { 'content-type': 'text/plain' } });
          assert.equal(text.status, 415, op.operationId);
          assert.equal(text.body.error, 'unsupported_media_type', op.operationId);
        }
      }
    });

    test('413 over 1 MiB, 415 for a body that is not JSON', async () => {
      const big = JSON.stringify({ label: 'x'.repeat(1024 * 1024) });
      const res = await t.request('POST', '/v1/api/keys', { key, raw: big, headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 413);
      assert.equal(res.body.error, 'payload_too_large');
      const text = await t.request('POST', '/v1/api/keys', { key, raw: 'label=x', headers: { 'content-type': 'text/plain' } });
      assert.equal(text.status, 415);
      assert.equal(text.body.error, 'unsupported_media_type');
      const form = await t.request('POST', '/v1/api/vms', { key, raw: 'plan=pro', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      assert.equal(form.status, 415);
      assert.equal((await t.request('GET', '/v1/api/keys', { key })).body.data.length, 1, 'nothing was issued');
    });

    test('429 with Retry-After over the per-key rate, other keys unaffected', async () => {
      const other = await t.tenant();
      const limited = await createTestApp(backend, { rateLimit: { perSecond: 1, burst: 3 } });
      try {
        const tenant = await limited.tenant();
        const statuses = [];
        for (let i = 0; i < 5; i++) statuses.push((await limited.request('GET', '/v1/api/whoami', { key: tenant.key })).status);
        assert.deepEqual(statuses.slice(0, 3), [200, 200, 200]);
        const res = await limited.request('GET', '/v1/api/whoami', { key: tenant.key });
        assert.equal(res.status, 429);
        assert.equal(res.body.error, 'rate_limited');
        assert.ok(Number(res.headers.get('retry-after')) >= 1);
      } finally {
        await limited.close();
      }
      assert.equal((await t.request('GET', '/v1/api/whoami', { key: other.key })).status, 200);
    });

    test('an unexpected failure is 500 internal with an empty message; the detail is only in the log', async () => {
      const original = t.services.usage.get;
      t.services.usage.get = async () => {
        throw new Error('secret detail: connection refused');
      };
      try {
        const res = await t.request('GET', '/v1/api/usage', { key, allowServerError: true });
        assert.equal(res.status, 500);
        assert.deepEqual(res.body, { error: 'internal', message: '' });
        const requestId = res.headers.get('x-request-id') ?? '';
        assert.ok(!res.text.includes('secret detail'));
        const line = t.logs.find((l) => l.includes(requestId) && l.includes('secret detail: connection refused'));
        assert.ok(line, 'the detail is logged under the request id');
      } finally {
        t.services.usage.get = original;
      }
    });

    test('every response carries X-Request-Id; a safe incoming one is kept', async () => {
      const res = await t.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-1234567890' } });
      assert.equal(res.headers.get('x-request-id'), 'trace-1234567890');
      const unsafe = await t.request('GET', '/healthz', { headers: { 'x-request-id': 'a b\tc<script>' } });
      assert.match(unsafe.headers.get('x-request-id') ?? '', /^req_/);
      assert.deepEqual(res.body, { ok: true });
    });

    test('/readyz answers 200 with a usable driver and 503 without one', async () => {
      const ready = await t.request('GET', '/readyz');
      assert.equal(ready.status, 200);
      assert.equal(ready.body.driver.accel, 'tcg');
      const down = await createTestApp(backend, {
        driver: async () => ({ usable: false, accel: null, qemu: null, detail: 'qemu-system-x86_64 is not installed' }),
      });
      try {
        const res = await down.request('GET', '/readyz');
        assert.equal(res.status, 503);
        assert.equal(res.body.error, 'unavailable');
        assert.ok(res.headers.get('retry-after'));
      } finally {
        await down.close();
      }
    });
  });
}

