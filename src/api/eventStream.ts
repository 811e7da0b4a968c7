/**
 * A server-sent event stream of something followed in the database (a run's output, an image build's
 * log): `retry`, the events as `follow` writes them, a keep-alive comment every so often, and the end.
 * An open stream holds its tenant's `run_streams` lease until it ends or its client goes (or the lease lapses).
 */
import type { Context } from 'hono';

/** A comment line every so often keeps proxies and load balancers from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

export function eventStreamResponse(
  c: Context,
  lease: { end(): Promise<void>; lapsed?: Promise<void> },
  follow: (write: (frame: string) => void, signal: AbortSignal) => Promise<void>,
): Response {
  const abort = new AbortController();
  const encoder = new TextEncoder();
  let keepalive: NodeJS.Timeout | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (!abort.signal.aborted) controller.enqueue(encoder.encode(text));
      };
      write('retry: 1000\n\n');
      keepalive = setInterval(() => write(': keepalive\n\n'), KEEPALIVE_MS);
      // A lease that ran out with the tenant's places taken meanwhile (StreamLease): the stream ends.
      void lease.lapsed?.then(() => {
        if (abort.signal.aborted) return;
        abort.abort();
        clearInterval(keepalive);
        controller.close();
      });
      follow(write, abort.signal)
        .catch(() => undefined)
        .finally(() => {
          clearInterval(keepalive);
          void lease.end();
          if (!abort.signal.aborted) controller.close();
        });
    },
    cancel() {
      clearInterval(keepalive);
      void lease.end();
      abort.abort();
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no', 'X-Request-Id': c.get('requestId') as string },
  });
}
