/**
 * Following one of the API's event streams (a run's output, an image build's log): its events as they
 * come, then the end event's record. A dropped connection (a server restart, a network cut) is picked
 * up again with `Last-Event-ID`, so nothing is seen twice or missed.
 */
import { createParser } from 'eventsource-parser';
import { ClientError } from './client.ts';

export interface StreamOptions {
  baseUrl: string;
  key: string | undefined;
  /** The stream's path under the base URL. */
  path: string;
  /** Start after this event (what a watcher saw last). */
  after?: number;
  /** Each event but the end: its name, id and data. */
  onEvent: (ev: { event: string; id: number; data: string }) => void;
  signal?: AbortSignal;
  /** How long to keep trying to reconnect after the stream drops (ms). */
  reconnectForMs?: number;
  /** What a person can do when the stream is lost for good. */
  lostHint: string;
}

/** One connection: events to `onEvent` until the stream ends; the end's record, or null if it dropped first. */
export async function readEventStream<End>(o: StreamOptions & { after: number }, seen: (id: number) => void): Promise<End | null> {
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.after > 0) headers['last-event-id'] = String(o.after);
  const res = await fetch(`${o.baseUrl}${o.path}`, { headers, signal: o.signal });
  if (!res.ok) {
    const e = (await res.json().catch(() => ({}))) as { error?: string; message?: string; hint?: string };
    throw new ClientError(e.error ?? `http_${res.status}`, e.message ?? '', e.hint, res.status);
  }
  let end: End | null = null;
  const parser = createParser({
    onEvent: (ev) => {
      if (ev.event === 'end') {
        end = JSON.parse(ev.data) as End;
      } else if (ev.event && ev.id !== undefined) {
        const id = Number(ev.id);
        seen(id);
        o.onEvent({ event: ev.event, id, data: ev.data });
      }
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (end) break;
    }
  } catch (err) {
    if (o.signal?.aborted) throw err;
    // the connection dropped: the caller picks up after the last event seen
  }
  return end;
}

/** Follows the stream to its end, reconnecting after drops; answers the end's record. */
export async function followEventStream<End>(o: StreamOptions): Promise<End> {
  let after = o.after ?? 0;
  let lastProgress = Date.now();
  const patience = o.reconnectForMs ?? 120_000;
  for (;;) {
    try {
      const end = await readEventStream<End>({ ...o, after }, (id) => {
        after = id;
        lastProgress = Date.now();
      });
      if (end) return end;
      lastProgress = Date.now();
    } catch (err) {
      if (o.signal?.aborted) throw err;
      const code = err instanceof ClientError ? err.code : 'unreachable';
      // Only a server that cannot be reached (restarting) is waited for; an answer stands.
      if (err instanceof ClientError && code !== 'unavailable' && code !== 'rate_limited' && !code.startsWith('http_5')) throw err;
      if (Date.now() - lastProgress > patience) {
        throw new ClientError('unreachable', `lost the event stream and could not get it back within ${Math.round(patience / 1000)} s`, o.lostHint);
      }
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}
