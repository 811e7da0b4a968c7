/**
 * Errors under `/e2b`: E2B's shape (`{"code": <status>, "message"}`). The domain's expected outcomes
 * (an error with a `code` of the contract's) keep their statuses.
 */
import type { Context } from 'hono';

const STATUS: Record<string, number> = {
  invalid_request: 400,
  unauthorized: 401,
  card_required: 402,
  insufficient_credits: 402,
  card_declined: 402,
  read_only_key: 403,
  quota_exceeded: 403,
  not_found: 404,
  vm_not_running: 409,
  idempotency_conflict: 409,
  conflict: 409,
  image_in_use: 409,
  payload_too_large: 413,
  rate_limited: 429,
  port_closed: 502,
  unavailable: 503,
};

/** An answer of E2B's shape, `{"code", "message"}`, with the code as its status. */
export const e2bError = (c: Context, code: number, message: string) => c.json({ code, message }, code as 400);

/** An error answered in E2B's shape. */
export class E2bError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Headers the answer carries (a 429's Retry-After). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

/** Any error as E2B's status and message; null for an unexpected one (a 500 to log). */
export function e2bErrorOf(err: unknown): { status: number; message: string; code?: string; headers?: Record<string, string> } | null {
  if (err instanceof E2bError) return { status: err.status, message: err.message, headers: err.headers };
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && STATUS[code]) {
    const message = (err as Error).message;
    // Money and scope refusals keep agentvm's code in the message: E2B's shape has no field for it.
    const headers = (err as { headers?: Record<string, string> }).headers;
    return { status: STATUS[code], code, headers, message: code === 'not_found' || code === 'unauthorized' ? message || code : `${code}: ${message}` };
  }
  return null;
}
