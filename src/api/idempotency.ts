import { invalid } from '../domain/errors.ts';

/** The Idempotency-Key header of a money POST: 1–255 visible ASCII characters, or absent. */
export function idempotencyKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(raw)) {
    throw invalid('Idempotency-Key', 'the Idempotency-Key header must be 1 to 255 visible ASCII characters');
  }
  return raw;
}
