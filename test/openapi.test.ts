import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createTestApp } from './helpers.ts';
import { CLIENT_TYPES_PATH, generateClientTypes } from '../scripts/gen-client.ts';

const CONTRACT_OPERATIONS = [
  'whoami', 'listHarnesses', 'getHarness', 'listVMs', 'createVM', 'getVM', 'stopVM', 'startVM', 'restartVM',
  'reprovisionVM', 'runVMTask', 'listTemplates', 'getTemplate', 'forkTemplate', 'captureTemplate', 'getBilling',
  'getUsage', 'listKeys', 'issueKey',
];

const t = await createTestApp({ name: 'pglite' });
after(() => t.close());

test('the served document is valid OpenAPI 3.1 with every operation of the contract', async () => {
  const res = await t.request('GET', '/v1/api/openapi.json');
  assert.equal(res.status, 200);
  const doc = res.body;
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, '1.0.0');
  const result = await new Validator().validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors));

  const ops = Object.values(doc.paths).flatMap((p: any) => Object.values(p)) as any[];
  const ids = ops.map((o) => o.operationId);
  for (const id of CONTRACT_OPERATIONS) assert.ok(ids.includes(id), `missing ${id}`);
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  for (const op of ops) {
    if (op.operationId.startsWith('login')) {
      // CLI login needs no key: it is how a key is had.
      assert.deepEqual(op.security, [], `${op.operationId} is public`);
    } else {
      assert.deepEqual(op.security, [{ bearerAuth: [] }], `${op.operationId} uses bearer auth`);
      assert.ok(op.responses['401'], `${op.operationId} lists 401`);
    }
    assert.ok(op.responses['500'], `${op.operationId} lists 500`);
    if (!CONTRACT_OPERATIONS.includes(op.operationId)) assert.equal(op['x-agentvm-extension'], true, op.operationId);
  }
  for (const id of ['revokeKey', 'destroyVM', 'setVMSecrets', 'loginStart', 'loginComplete']) assert.ok(ids.includes(id), `missing extension ${id}`);
  assert.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');
});

test('the typed client is generated from the served document and is current (npm run gen:client)', async () => {
  assert.equal(await readFile(CLIENT_TYPES_PATH, 'utf8'), await generateClientTypes());
});

test('every error status an operation answers with is in the document', async () => {
  const doc = (await t.request('GET', '/v1/api/openapi.json')).body;
  const create = doc.paths['/v1/api/vms'].post;
  for (const status of ['201', '400', '401', '402', '403', '409', '413', '415', '429', '500', '503']) {
    assert.ok(create.responses[status], `createVM lists ${status}`);
  }
  assert.match(create.responses['402'].description, /card_required/);
  assert.match(create.responses['402'].description, /insufficient_credits/);
  assert.match(create.responses['402'].description, /card_declined/);
  assert.ok(create.parameters.some((p: any) => p.name === 'Idempotency-Key' && p.in === 'header'));
  assert.equal(doc.paths['/v1/api/keys'].post.responses['403'].content['application/json'].schema.$ref, '#/components/schemas/Error');
  assert.equal(doc.components.schemas.Error.additionalProperties, false);
  const list = doc.paths['/v1/api/templates'].get.parameters;
  assert.deepEqual(
    list.filter((p: any) => p.in === 'query').map((p: any) => p.name).sort(),
    ['harness', 'limit', 'offset', 'q', 'sort', 'tag'],
  );
});

test('a fork answers its tier (null for a plan VM); the owner-only scrub_report is nullable', async () => {
  const { schemas } = (await t.request('GET', '/v1/api/openapi.json')).body.components;
  assert.deepEqual(schemas.ForkResponse.required.sort(), ['status', 'template_id', 'tier', 'vm_id']);
  assert.deepEqual(schemas.ForkResponse.properties.tier.type, ['string', 'null']);
  const scrub = schemas.Template.properties.scrub_report;
  assert.ok(scrub.type.includes('null'), JSON.stringify(scrub));
  assert.match(scrub.description, /owner/);
  assert.ok(!schemas.Template.required.includes('scrub_report'), 'other tenants never see it');
});

test('the document is rendered for people at /docs', async () => {
  const res = await t.request('GET', '/docs');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/html/);
  assert.match(res.text, /\/v1\/api\/openapi\.json/);
  const asset = await t.request('GET', '/docs/assets/swagger-ui-bundle.js');
  assert.equal(asset.status, 200);
  assert.ok(asset.text.length > 100_000);
});

test('the operator API has its own document, valid too', async () => {
  const doc = (await t.request('GET', '/v1/admin/openapi.json')).body;
  const result = await new Validator().validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors));
  assert.ok(doc.paths['/v1/admin/tenants'].post);
});
