/**
 * The cap on request bodies (decisions.md section 14): 1 MiB everywhere but the operations whose body is
 * bytes (a VM's files, an image's build context), which have caps of their own. A body over its cap is
 * refused before anything reads it, the console's forms before sign-in included, and the connection is
 * closed so that the rest of it is never read.
 */
import type { Context } from 'hono';
import { DomainError } from '../domain/errors.ts';
import { requestHeader } from './requestHeader.ts';

/** The cap on a JSON body. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** MCP's cap: its file tools carry up to 4 MiB of a file's bytes in base64 in one JSON-RPC message. */
export const MCP_MAX_BODY_BYTES = 6 * 1024 * 1024;

export const tooLarge = (max: number) =>
  new DomainError('payload_too_large', `the request body is over ${max} bytes`, 'send a smaller body', { Connection: 'close' });

/**
 * Holds a request's body to `max` bytes before it is read: a declared length over the cap is refused at
 * once; a body without one (chunked) is read into memory up to the cap and handed on, or refused as soon
 * as it goes over. Answers the error to send, or null.
 */
export async function capBody(c: Context, max: number): Promise<DomainError | null> {
  const length = requestHeader(c, 'content-length');
  const chunked = requestHeader(c, 'transfer-encoding') !== undefined;
  if (length === undefined && !chunked) return null;
  if (!chunked) return Number(length) > max ? tooLarge(max) : null;
  const body = c.req.raw.body;
  if (!body) return null;
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    // Nothing more is read: the answer closes the connection.
    if (size > max) return tooLarge(max);
    chunks.push(value);
  }
  c.req.raw = new Request(c.req.raw, { body: Buffer.concat(chunks) });
  return null;
}
