/**
 * Following a run's event stream (`GET …/runs/{run_id}/events`): its output as it comes, then the
 * finished run. A dropped connection (a server restart, a network cut) is picked up again with
 * `Last-Event-ID`, so nothing is seen twice or missed.
 */
import { createParser } from 'eventsource-parser';
import { ClientError, type Schemas } from './client.ts';

export type Run = Schemas['Run'];

export interface RunOutput {
  id: number;
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface FollowOptions {
  baseUrl: string;
  key: string | undefined;
  vmId: string;
  runId: string;
  /** Start after this event (what a watcher saw last). */
  after?: number;
  onOutput: (out: RunOutput) => void;
  signal?: AbortSignal;
  /** How long to keep trying to reconnect after the stream drops (ms). */
  reconnectForMs?: number;
}

/** One connection: output events to `onOutput` until the stream ends; the finished run, or null if it dropped first. */
export async function readRunStream(o: FollowOptions & { after: number }, seen: (id: number) => void): Promise<Run | null> {
  const url = `${o.baseUrl}/v1/api/vms/${encodeURIComponent(o.vmId)}/runs/${encodeURIComponent(o.runId)}/events`;
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.after > 0) headers['last-event-id'] = String(o.after);
  const res = await fetch(url, { headers, signal: o.signal });
  if (!res.ok) {
    const e = (await res.json().catch(() => ({}))) as { error?: string; message?: string; hint?: string };
    throw new ClientError(e.error ?? `http_${res.status}`, e.message ?? '', e.hint, res.status);
  }
  let end: Run | null = null;
  const parser = createParser({
    onEvent: (ev) => {
      if (ev.event === 'end') {
        end = JSON.parse(ev.data) as Run;
      } else if (ev.event === 'stdout' || ev.event === 'stderr') {
        const id = Number(ev.id);
        seen(id);
        o.onOutput({ id, stream: ev.event, text: (JSON.parse(ev.data) as { text: string }).text });
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

/** Follows the run to its end, reconnecting after drops; answers the finished run. */
export async function followRun(o: FollowOptions): Promise<Run> {
  let after = o.after ?? 0;
  let lastProgress = Date.now();
  const patience = o.reconnectForMs ?? 120_000;
  for (;;) {
    try {
      const end = await readRunStream({ ...o, after }, (id) => {
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
        throw new ClientError('unreachable', `lost the run's event stream and could not get it back within ${Math.round(patience / 1000)} s`, 'the run goes on: `agentvm runs get` shows it');
      }
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}
