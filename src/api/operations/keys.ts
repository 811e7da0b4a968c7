import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { idParam, IssuedKey, IssueKeyRequest, KeyList, RevokedKey } from '../schemas.ts';
import { iso, presentIssuedKey, presentKey } from '../present.ts';
import { notFound } from '../../domain/errors.ts';

export const listKeys = defineOperation({
  operationId: 'listKeys',
  method: 'get',
  path: '/v1/api/keys',
  summary: "List the tenant's API keys (metadata only)",
  tag: 'Keys',
  audience: 'customer',
  mcp: { tool: 'keys_list' },
  cli: { command: 'keys list', columns: ['key_id', 'prefix', 'label', 'scope', 'created_at', 'last_used_at'] },
  success: { status: 200, schema: KeyList, description: 'Key metadata; never a hash or a plaintext' },
  errors: [],
  handler: async ({ services, principal }) => ({
    body: { data: (await services.keys.list(principal.tenantId)).filter((k) => !k.revoked_at).map(presentKey) },
  }),
});

export const issueKey = defineOperation({
  operationId: 'issueKey',
  method: 'post',
  path: '/v1/api/keys',
  summary: 'Issue an API key; the plaintext is returned once',
  tag: 'Keys',
  audience: 'customer',
  mcp: { tool: 'key_issue' },
  cli: { command: 'keys issue', examples: ['agentvm keys issue --label ci --scope readwrite'] },
  body: { schema: IssueKeyRequest, required: false },
  success: { status: 201, schema: IssuedKey, description: 'The new key, with its plaintext shown only here' },
  errors: ['quota_exceeded'],
  handler: async ({ services, principal, body }) => {
    const { key, record } = await services.keys.issue(null, principal.tenantId, {
      label: body.label ?? '',
      scope: body.scope ?? 'read',
      format: body.format,
    });
    return { body: presentIssuedKey(record, key) };
  },
});

export const revokeKey = defineOperation({
  operationId: 'revokeKey',
  method: 'delete',
  path: '/v1/api/keys/{key_id}',
  summary: 'Revoke an API key (extension)',
  description: 'The key is refused everywhere within one second. Revoking a revoked key answers it again.',
  tag: 'Keys',
  audience: 'customer',
  mcp: { tool: 'key_revoke', destructive: true, idempotent: true },
  cli: { command: 'keys revoke' },
  extension: true,
  params: z.strictObject({ key_id: idParam('A key id (`key_…`)') }),
  success: { status: 200, schema: RevokedKey, description: 'The revoked key' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => {
    const record = await services.keys.revoke(principal.tenantId, params.key_id);
    if (!record?.revoked_at) throw notFound('key');
    return { body: { ...presentKey(record), revoked_at: iso(record.revoked_at) } };
  },
});
