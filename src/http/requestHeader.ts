import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';

/**
 * A request header. On Node it is read from the incoming message itself: asking the Fetch Request
 * for a header makes it build a whole Headers object first, which costs more than the rest of a
 * cached whoami. Elsewhere (tests calling app.request) it falls back to the Request.
 */
export function requestHeader(c: Context, name: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming) {
    const v = incoming.headers[name];
    return Array.isArray(v) ? v.join(', ') : v;
  }
  return c.req.header(name);
}
