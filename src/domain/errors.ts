/** Every error code the platform answers with, declared once: their HTTP statuses are the API's (http/errors.ts). */
export const ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'card_required',
  'insufficient_credits',
  'card_declined',
  'read_only_key',
  'quota_exceeded',
  'not_found',
  'method_not_allowed',
  'vm_not_running',
  'idempotency_conflict',
  'conflict',
  'image_in_use',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'internal',
  'port_closed',
  'unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * An expected outcome that is not a success: its code and a message safe to show (and headers the
 * answer should carry, such as Retry-After). Which HTTP status a code is, only the HTTP edge knows (http/errors.ts).
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly hint?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export const notFound = (what: string) => new DomainError('not_found', `${what} not found`);
export const invalid = (field: string, problem: string) =>
  new DomainError('invalid_request', `${field}: ${problem}`);
