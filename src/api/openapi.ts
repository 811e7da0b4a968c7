import { z } from 'zod';
import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { ErrorCode } from '../domain/errors.ts';
import { ERROR_STATUS } from '../http/errors.ts';
import { commonErrors, type Operation } from './operation.ts';
import { ErrorBody } from './schemas.ts';

export const CONTRACT_VERSION = '1.0.0';

const ERROR_MEANING: Record<ErrorCode, string> = {
  invalid_request: 'Malformed JSON, wrong type, unknown field or value out of range; `message` names the field',
  unauthorized: 'Missing, malformed, unknown or revoked key; `message` is empty',
  card_required: 'No card on file',
  insufficient_credits: 'Prepaid credits do not cover an hour per VM',
  card_declined: 'The card on file was declined',
  read_only_key: 'A read key on a write',
  quota_exceeded: 'Over one of the tenant\'s limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed',
  not_found: 'Unknown or unowned id; do not retry',
  method_not_allowed: 'Known path, other method; the Allow header lists the methods',
  vm_not_running: 'The VM is not running',
  idempotency_conflict: 'The Idempotency-Key was used with another body',
  conflict: 'The resource already exists',
  image_in_use: 'The image is used by a VM or by another image built on it; `message` says by what',
  payload_too_large: 'Body over 1 MiB',
  unsupported_media_type: 'A body that is not application/json',
  rate_limited: 'Over the per-key rate; see Retry-After',
  internal: 'Unexpected server error; `message` is empty, the detail is logged under the request id',
  port_closed: 'A preview request to a port of the VM where nothing listens; `message` names the port',
  unavailable: 'No host capacity or the VM driver is down; see Retry-After',
};

/** What a code means for this operation: a body of bytes has its own limit and media type. */
function meaning(op: Operation, code: ErrorCode): string {
  if (op.binaryBody && code === 'payload_too_large') return `Body over ${op.binaryBody.maxBytes / 1024 / 1024} MiB; nothing is left behind`;
  if (op.binaryBody && code === 'unsupported_media_type') return `A body that is not ${op.binaryBody.mediaType}`;
  return ERROR_MEANING[code];
}

const requestIdHeader = { 'X-Request-Id': { description: 'Identifies the request in the server log', schema: { type: 'string' as const } } };
const retryAfterHeader = { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' as const } } };

/** Bytes in a request or response body (OpenAPI 3.1: a string of that media type). */
const binarySchema = (description: string) => ({ type: 'string' as const, format: 'binary', description });

function responsesFor(op: Operation): RouteConfig['responses'] {
  const responses: RouteConfig['responses'] = {
    [op.success.status]: {
      description: op.success.description,
      headers: requestIdHeader,
      content: {
        ...(op.success.binary ? { [op.success.binary.mediaType]: { schema: binarySchema(op.success.binary.description) } } : {}),
        [op.success.contentType ?? 'application/json']: { schema: op.success.schema },
      },
    },
  };
  if (op.alsoAnswers) {
    responses[op.alsoAnswers.status] = {
      description: op.alsoAnswers.description,
      headers: requestIdHeader,
      content: { 'application/json': { schema: op.alsoAnswers.schema } },
    };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set([...commonErrors(op), ...op.errors])) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[status] = {
      description: codes.map((code) => `\`${code}\`: ${meaning(op, code)}`).join('; '),
      headers: status === 429 || status === 503 ? { ...requestIdHeader, ...retryAfterHeader } : requestIdHeader,
      content: { 'application/json': { schema: ErrorBody } },
    };
  }
  return responses;
}

function toRoute(op: Operation): RouteConfig {
  const route: RouteConfig & Record<string, unknown> = {
    method: op.method,
    path: op.path,
    operationId: op.operationId,
    summary: op.summary,
    description: op.description,
    tags: [op.tag],
    request: {
      params: op.params as RouteConfig['request'] extends infer R ? (R extends { params?: infer P } ? P : never) : never,
      query: op.query as never,
      headers: op.money
        ? z.object({
            'Idempotency-Key': z
              .string()
              .max(255)
              .optional()
              .meta({ description: 'Replays the first response for the same key and body for 24 hours, charging once' }),
            ...(op.headers?.shape ?? {}),
          })
        : op.headers,
      body: op.body
        ? { required: op.body.required, content: { 'application/json': { schema: op.body.schema } } }
        : op.binaryBody
          ? { required: true, content: { [op.binaryBody.mediaType]: { schema: binarySchema(op.binaryBody.description) } } }
          : undefined,
    },
    responses: responsesFor(op),
  };
  route.security = op.audience === 'public' ? [] : [{ [op.audience === 'admin' ? 'adminToken' : 'bearerAuth']: [] }];
  if (op.extension) route['x-agentvm-extension'] = true;
  if (op.money) route['x-agentvm-charges-money'] = true;
  Object.assign(route, op.extensions ?? {});
  return route;
}

/** Builds the OpenAPI 3.1 document from the same operation definitions that serve the requests. */
export function buildOpenApiDocument(operations: Operation[], opts: { title: string; description: string }) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key: `avm_live_` followed by 40 base62 characters',
  });
  registry.registerComponent('securitySchemes', 'adminToken', {
    type: 'http',
    scheme: 'bearer',
    description: 'The operator token (AGENTVM_ADMIN_TOKEN or <data-dir>/admin-token)',
  });
  for (const op of operations) registry.registerPath(toRoute(op));
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: { title: opts.title, version: CONTRACT_VERSION, description: opts.description },
    servers: [{ url: '/' }],
  });
}
