/** Every error code the platform answers with, and its HTTP status: declared once, here. */
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
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** An expected outcome that is not a success: it carries its code and a message safe to show. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly hint?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
export const invalid = (field: string, problem: string) =>
  new ApiError('invalid_request', `${field}: ${problem}`);
