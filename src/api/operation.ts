import type { Context } from 'hono';
import { z } from 'zod';
import { DomainError, type ErrorCode } from '../domain/errors.ts';
import type { Principal } from '../domain/keys.ts';
import type { Services } from '../domain/services.ts';
import type { WaitTarget } from '../domain/vmState.ts';
import { MAX_BODY_BYTES } from '../http/bodyLimit.ts';
import { NoQuery } from './schemas.ts';

export { MAX_BODY_BYTES };

/** Who may call an operation: a customer key, the operator's admin token, or anyone. */
export type Audience = 'customer' | 'admin' | 'public';

export interface HandlerContext<P, Q, B> {
  c: Context;
  services: Services;
  principal: Principal;
  params: P;
  query: Q;
  body: B;
  /** The body of an operation with `binaryBody`: its bytes as they come, never read whole, and the length it declared. */
  bytes?: { stream: AsyncIterable<Uint8Array>; length?: number };
}

export type HandlerResult<T> =
  | { body: T; status?: number; headers?: Record<string, string> }
  /** Bytes, not JSON (an operation with `success.binary`): streamed to the client as they come. */
  | { stream: ReadableStream<Uint8Array>; mediaType: string; length?: number; status?: number; headers?: Record<string, string> }
  /** A response made whole by the handler (an event stream): sent as it is. */
  | { response: Response };

/** A request or response body of bytes rather than JSON. */
export interface BinaryContent {
  mediaType: 'application/octet-stream';
  description: string;
}

type AnyZod = z.ZodType;

/** How an operation reads as an MCP tool (src/mcp/server.ts). */
export interface McpHints {
  /** The tool's name; by default the operationId in snake case (`pauseVM` → `pause_vm`). */
  tool?: string;
  /** It may end or discard what the caller has (a VM's processes, a key, a delivery log). */
  destructive?: boolean;
  /** Calling it again with the same arguments changes nothing more. */
  idempotent?: boolean;
  /** A body that is not an object of fields (the secrets map) goes under this argument. */
  wholeBody?: string;
  /** An argument that, false, asks for the answer at once (`Prefer: respond-async`). */
  asyncArgument?: { name: string; description: string };
}

/**
 * How an operation reads as a CLI command (src/cli/operationCommands.ts). Plain data: the command's
 * bundle carries it, made ahead (src/cli/operationSpec.ts).
 */
export interface CliHints {
  /** Its words (`vms stop`); by default its tag's group and its operationId without the group's noun. */
  command?: string;
  /** Adds `--wait`: after the call, waits until the VM in the answer has this status. */
  waitFor?: WaitTarget;
  /** The columns a person sees for a `data` list; by default its first scalar fields. */
  columns?: string[];
  /** One page of a longer list: the table ends with the total and the next page's `--offset`. */
  paged?: boolean;
  /** Flags that stand for body fields (`--public` for `--visibility public`). */
  presets?: Array<{ flag: string; description: string; sets: Record<string, unknown> }>;
  examples?: string[];
}

/** One operation: its contract (for the OpenAPI document and validation) and its handler. */
export interface Operation<P extends AnyZod = AnyZod, Q extends AnyZod = AnyZod, B extends AnyZod = AnyZod, R extends AnyZod = AnyZod> {
  operationId: string;
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI form, `{id}` for parameters. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  audience: Audience;
  /** A write needs a readwrite key; every non-GET customer operation is one. */
  write?: boolean;
  /** Charges money: documented as such, and takes an Idempotency-Key. */
  money?: boolean;
  /** Beyond the 19 operations of the contract. */
  extension?: boolean;
  params?: P;
  query?: Q;
  /** `maxBytes`: a JSON body that carries files (an image's build context) may be larger than MAX_BODY_BYTES. */
  body?: { schema: B; required: boolean; maxBytes?: number };
  /** A body of bytes instead of JSON, up to `maxBytes` (413 beyond, before or while it is read). */
  binaryBody?: BinaryContent & { maxBytes: number };
  /**
   * `binary`: the success may also be bytes of this media type (the JSON `schema` is the other form);
   * `contentType`: the success is of this type instead of JSON (an event stream).
   */
  success: { status: 200 | 201; schema: R; description: string; binary?: BinaryContent; contentType?: string };
  /** Another success answer (an asynchronous start), for the document. */
  alsoAnswers?: { status: 202; schema: AnyZod; description: string };
  /** Request headers it reads, for the document (Idempotency-Key is added for money operations). */
  headers?: z.ZodObject;
  /** `x-` extensions of the operation in the OpenAPI document (a WebSocket it leads to, …). */
  extensions?: Record<`x-${string}`, unknown>;
  /** Error codes this operation answers with beyond the ones every operation of its audience has. */
  errors: ErrorCode[];
  mcp?: McpHints;
  cli?: CliHints;
  handler: (ctx: HandlerContext<z.output<P>, z.output<Q>, z.output<B>>) => Promise<HandlerResult<z.input<R>>>;
}

export function defineOperation<P extends AnyZod, Q extends AnyZod, B extends AnyZod, R extends AnyZod>(
  op: Operation<P, Q, B, R>,
): Operation {
  return op as unknown as Operation;
}

/** Codes every operation of an audience can answer with. */
export function commonErrors(op: Operation): ErrorCode[] {
  // Every operation refuses unknown query parameters, so every one can answer 400.
  const codes: ErrorCode[] = ['internal', 'invalid_request'];
  if (op.audience !== 'public') codes.push('unauthorized', 'rate_limited');
  if (op.audience === 'customer' && isWrite(op)) codes.push('read_only_key');
  if (op.body || op.binaryBody) codes.push('payload_too_large', 'unsupported_media_type');
  return codes;
}

export const isWrite = (op: Operation) => op.write ?? op.method !== 'get';

/** Turns a zod failure into a 400 that names the field. */
export function validationError(where: 'body' | 'query' | 'path', error: z.ZodError): DomainError {
  if (where === 'path') return new DomainError('not_found', 'not found');
  const issue = error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const field = [...issue.path, issue.keys[0]].join('.');
    const noun = where === 'query' ? 'query parameter' : 'field';
    return new DomainError('invalid_request', `${field}: unknown ${noun}`);
  }
  const field = issue.path.length ? issue.path.join('.') : where;
  return new DomainError('invalid_request', `${field}: ${issue.message}`);
}

function parseWith<T extends AnyZod>(schema: T, value: unknown, where: 'body' | 'query' | 'path'): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(where, result.error);
  return result.data;
}

/** Reads the body up to the size limit, then checks its media type and parses it as JSON. */
export async function readJsonBody(c: Context, required: boolean, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const declared = c.req.header('content-length');
  if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const stream = c.req.raw.body;
  if (stream) {
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
  }
  const mediaType = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
  const isJson = mediaType === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
  if (mediaType && !isJson && (size > 0 || required)) {
    throw new DomainError('unsupported_media_type', `content type "${mediaType}" is not supported`, 'send the body as application/json');
  }
  if (size === 0) {
    if (required) throw new DomainError('invalid_request', 'body: a JSON request body is required');
    return {};
  }
  if (!mediaType) {
    throw new DomainError('unsupported_media_type', 'the request has a body but no content type', 'send the body as application/json');
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new DomainError('invalid_request', 'body: malformed JSON');
  }
}

const tooLarge = (maxBytes: number) => new DomainError('payload_too_large', `the body is larger than ${maxBytes} bytes`);

/**
 * The body of a binary operation, unread: its declared length checked against the limit, its media
 * type against the operation's (none at all is taken as bytes too: `curl -T` sends none).
 */
function binaryBody(c: Context, spec: NonNullable<Operation['binaryBody']>): { stream: AsyncIterable<Uint8Array>; length?: number } {
  const declared = c.req.header('content-length');
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) throw new DomainError('invalid_request', 'Content-Length: not a length');
  if (length !== undefined && length > spec.maxBytes) {
    throw new DomainError('payload_too_large', `the body is larger than ${spec.maxBytes} bytes`, undefined, { Connection: 'close' });
  }
  const mediaType = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (mediaType && mediaType !== spec.mediaType) {
    throw new DomainError('unsupported_media_type', `content type "${mediaType}" is not supported`, `send the bytes as ${spec.mediaType} (curl -T FILE, or --data-binary @FILE -H 'content-type: ${spec.mediaType}')`, { Connection: 'close' });
  }
  const stream = c.req.raw.body ?? new ReadableStream<Uint8Array>({ start: (ctl) => ctl.close() });
  return { stream: stream as unknown as AsyncIterable<Uint8Array>, length };
}

/** Parses and checks a request for an operation, then runs its handler. */
export async function runOperation(op: Operation, c: Context, services: Services): Promise<Response> {
  const principal = c.get('principal') as Principal;
  if (op.audience === 'customer' && isWrite(op) && principal.scope !== 'readwrite') {
    throw new DomainError('read_only_key', 'this key is read-only', 'use a readwrite key for this operation');
  }
  const body = op.body ? parseWith(op.body.schema, await readJsonBody(c, op.body.required, op.body.maxBytes), 'body') : undefined;
  const bytes = op.binaryBody ? binaryBody(c, op.binaryBody) : undefined;
  const params = op.params ? parseWith(op.params, c.req.param(), 'path') : undefined;
  // Most calls carry no query string: skip parsing one then, unless the operation has defaults to fill in.
  const query = op.query || c.req.url.includes('?') ? parseWith(op.query ?? NoQuery, c.req.query(), 'query') : {};
  const result = await op.handler({ c, services, principal, params, query, body, bytes });
  if ('response' in result) return result.response;
  const status = (result.status ?? op.success.status) as 200;
  if ('stream' in result) {
    const headers: Record<string, string> = { 'Content-Type': result.mediaType, ...result.headers };
    if (result.length !== undefined) headers['Content-Length'] = String(result.length);
    return c.body(result.stream, status, headers);
  }
  return c.json(result.body as object, status, result.headers);
}
