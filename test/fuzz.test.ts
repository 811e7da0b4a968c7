import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import { ADMIN_OPERATIONS, CUSTOMER_OPERATIONS } from '../src/api/routes.ts';

/** Everything a request could change, but key usage stamps (reads write those on purpose). */
async function snapshot(t: TestApp): Promise<string> {
  const tables = ['tenants', 'api_keys', 'vms', 'templates', 'ledger', 'idempotency_keys', 'hosts'];
  const parts: unknown[] = [];
  for (const table of tables) {
    const rows = await t.db.query(`SELECT * FROM ${table} ORDER BY 1`);
    parts.push(rows.map((r: Record<string, unknown>) => ({ ...r, last_used_at: undefined })));
  }
  return JSON.stringify(parts);
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];
const templatePaths = [...CUSTOMER_OPERATIONS, ...ADMIN_OPERATIONS].map((op) => op.path);
templatePaths.push('/healthz', '/readyz', '/v1/api/openapi.json', '/v1/api', '/v1/api/', '/v1/api/vms/', '/');

for (const backend of backends()) {
  describe(`random input on ${backend.name}`, () => {
    let t: TestApp;
    let keys: Record<string, string | undefined>;
    let tenantId: string;
    before(async () => {
      t = await createTestApp(backend);
      const tenant = await t.tenant();
      tenantId = tenant.tenantId;
      const read = (await t.request('POST', '/v1/api/keys', { key: tenant.key, body: { scope: 'read' } })).body.key;
      keys = { rw: tenant.key, read, admin: t.adminToken, none: undefined, junk: 'avm_live_0000' };
    });
    after(() => t.close());

    test('random methods, paths, headers, query strings and bodies: never a 5xx, always the Error shape, no change on failure', async () => {
      const segment = fc.oneof(
        fc.constantFrom('vm_x', 'tpl_x', 'echo', 'claude-code', 'ten_x', '%00', '..', '%2e%2e', 'a'.repeat(300)),
        fc.string({ maxLength: 20 }).map(encodeURIComponent),
      );
      const path = fc.tuple(fc.constantFrom(...templatePaths), segment, fc.boolean()).map(([p, seg, extra]) =>
        p.replace(/\{[^}]+\}/g, () => (seg || 'x')).replace('ten_x', tenantId) + (extra ? `/${seg}` : ''),
      );
      const query = fc.dictionary(
        fc.constantFrom('limit', 'offset', 'sort', 'q', 'tag', 'harness', 'x', '__proto__', 'constructor'),
        fc.oneof(fc.string({ maxLength: 30 }), fc.integer().map(String), fc.constantFrom('-1', '1e9', 'NaN', '100', '0')),
        { maxKeys: 3 },
      );
      const jsonBody = fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        fc.record({
          plan: fc.oneof(fc.constantFrom('starter', 'pro', 'max', 'gold'), fc.integer()),
          tier: fc.constantFrom('spot', 'ondemand', 'free', undefined),
          count: fc.oneof(fc.integer({ min: -5, max: 30 }), fc.double()),
          task: fc.string({ maxLength: 50 }),
          scope: fc.constantFrom('read', 'readwrite', 'admin'),
          email: fc.oneof(fc.emailAddress(), fc.string()),
          amount_cents: fc.oneof(fc.integer(), fc.double()),
          last4: fc.stringMatching(/^[0-9]{3,5}$/),
          brand: fc.string({ maxLength: 8 }),
        }, { requiredKeys: [] }),
      );
      const body = fc.oneof(
        fc.constant(undefined),
        jsonBody.map((v) => ({ raw: JSON.stringify(v) ?? 'null', type: 'application/json' })),
        fc.string({ maxLength: 100 }).map((s) => ({ raw: s, type: 'application/json' })),
        fc.string({ maxLength: 100 }).map((s) => ({ raw: s, type: 'text/plain' })),
        fc.string({ maxLength: 100 }).map((s) => ({ raw: s, type: undefined })),
      );
      const headerNoise = fc.dictionary(
        fc.constantFrom('x-request-id', 'idempotency-key', 'accept', 'content-length-x', 'x-forwarded-for'),
        fc.stringMatching(/^[ -~]{0,40}$/),
        { maxKeys: 2 },
      );

      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...METHODS),
          path,
          query,
          body,
          fc.constantFrom('rw', 'read', 'admin', 'none', 'junk'),
          headerNoise,
          async (method, p, q, b, who, noise) => {
            const before = await snapshot(t);
            const qs = new URLSearchParams(q).toString();
            const url = qs ? `${p}?${qs}` : p;
            const headers: Record<string, string> = { ...noise };
            if (b?.type) headers['content-type'] = b.type;
            const res = await t.request(method, url, {
              key: keys[who],
              headers,
              raw: method === 'GET' || method === 'HEAD' ? undefined : b?.raw,
            });
            assert.ok(res.status < 500 || res.status === 503, `${method} ${url} → ${res.status}`);
            // 503 only where a VM host is needed and this app has none (VMs, captures, snapshots, the base image).
            if (res.status === 503) assert.match(url, /^\/readyz|\/v1\/api\/(vms|templates|snapshots|images\/base)/);
            if (res.status >= 300 || method === 'GET') {
              assert.equal(await snapshot(t), before, `${method} ${url} → ${res.status} changed the database`);
            }
          },
        ),
        { numRuns: Number(process.env.AGENTVM_FUZZ_RUNS ?? 300), ...(process.env.AGENTVM_FUZZ_SEED ? { seed: Number(process.env.AGENTVM_FUZZ_SEED) } : {}) },
      );
    });
  });
}
