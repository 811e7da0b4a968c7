/**
 * The one place an expected outcome (a DomainError, domain/errors.ts) becomes an HTTP answer: each
 * code's status, the contract's Error body, and the same refusal on a socket being upgraded. The
 * public API, the console, the previews and a VM host's internal API all answer through it.
 */
import type { Context } from 'hono';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { DomainError, ErrorCode } from '../domain/errors.ts';

export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  card_required: 402,
  insufficient_credits: 402,
  card_declined: 402,
  read_only_key: 403,
  quota_exceeded: 403,
  not_found: 404,
  method_not_allowed: 405,
  vm_not_running: 409,
  idempotency_conflict: 409,
  conflict: 409,
  image_in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  port_closed: 502,
  unavailable: 503,
} as const satisfies Record<ErrorCode, number>;

export const statusOf = (err: Pick<DomainError, 'code'>): number => ERROR_STATUS[err.code];

/** The contract's Error body of an error. */
export function errorBody(err: DomainError): { error: string; message: string; hint?: string } {
  const body: { error: string; message: string; hint?: string } = { error: err.code, message: err.message };
  if (err.hint) body.hint = err.hint;
  return body;
}

/** An error as a response: the contract's Error body, its status, its headers. */
export function renderError(c: Context, err: DomainError): Response {
  return c.json(errorBody(err), statusOf(err) as 400, err.headers);
}

/** Answers an upgrade request with an HTTP error in the contract's Error shape, and hangs up. */
export function refuseUpgrade(socket: Duplex, err: DomainError, requestId: string): void {
  const text = JSON.stringify(errorBody(err));
  const status = statusOf(err);
  const headers = {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
    'X-Request-Id': requestId,
    Connection: 'close',
    ...(err.headers ?? {}),
  };
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${text}`);
}
