import { invalid } from '../domain/errors.ts';
import type { StoredResponse } from '../domain/idempotency.ts';

/** The Idempotency-Key header of a money POST: 1–255 visible ASCII characters, or absent. */
export function idempotencyKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(raw)) {
    throw invalid('Idempotency-Key', 'the Idempotency-Key header must be 1 to 255 visible ASCII characters');
  }
  return raw;
}

/** A money POST's answer: the stored status and body, marked when it is a replay. */
export function replayable<T>(result: StoredResponse<T>): { status: number; body: T; headers?: Record<string, string> } {
  return { status: result.status, body: result.body, headers: result.replayed ? { 'Idempotent-Replayed': 'true' } : undefined };
}
