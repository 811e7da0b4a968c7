import type { Context } from 'hono';
import type { ApiError } from '../domain/errors.ts';

/** The one place an error becomes a response: the contract's Error body, its status, its headers. */
export function renderError(c: Context, err: ApiError): Response {
  const body: { error: string; message: string; hint?: string } = { error: err.code, message: err.message };
  if (err.hint) body.hint = err.hint;
  return c.json(body, err.status as 400, err.headers);
}
