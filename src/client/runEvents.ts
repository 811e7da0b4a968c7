/**
 * Following a run's event stream (`GET …/runs/{run_id}/events`): its output as it comes, then the
 * finished run (eventStream.ts picks a dropped connection up again).
 */
import { followEventStream, readEventStream, type StreamOptions } from './eventStream.ts';
import type { Schemas } from './client.ts';

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

/** The generic stream's options for a run's. */
function streamOf(o: FollowOptions): StreamOptions {
  return {
    baseUrl: o.baseUrl,
    key: o.key,
    path: `/v1/api/vms/${encodeURIComponent(o.vmId)}/runs/${encodeURIComponent(o.runId)}/events`,
    after: o.after,
    signal: o.signal,
    reconnectForMs: o.reconnectForMs,
    lostHint: 'the run goes on: `agentvm runs get` shows it',
    onEvent: (ev) => {
      if (ev.event === 'stdout' || ev.event === 'stderr') o.onOutput({ id: ev.id, stream: ev.event, text: (JSON.parse(ev.data) as { text: string }).text });
    },
  };
}

/** One connection: output to `onOutput` until the stream ends; the finished run, or null if it dropped first. */
export function readRunStream(o: FollowOptions & { after: number }, seen: (id: number) => void): Promise<Run | null> {
  return readEventStream<Run>({ ...streamOf(o), after: o.after }, seen);
}

/** Follows the run to its end, reconnecting after drops; answers the finished run. */
export function followRun(o: FollowOptions): Promise<Run> {
  return followEventStream<Run>(streamOf(o));
}
