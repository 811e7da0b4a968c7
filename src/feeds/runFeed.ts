/**
 * Word that a run has news: output stored, or its end. The VM's host publishes once its write is
 * committed; whoever follows the run (an event stream, a run waited on) wakes and reads on. In the
 * process that wrote, the news carries the stored events themselves (many watchers of one run cost no
 * query each); other processes on the same PostgreSQL hear of it by NOTIFY and read the rows.
 */
import type { Db } from '../store/db.ts';
import { Feed } from './feed.ts';
import type { RunEventRow } from '../store/runs.ts';

export interface RunNews {
  run_id: string;
  /** Events just stored, in order (absent when the news came from another process). */
  events?: RunEventRow[];
  /** The run ended (or news from another process: it may have). */
  finished?: boolean;
}

/** Runs' news; across processes, the key and whether the run finished (`f`). */
export class RunFeed extends Feed<RunNews> {
  constructor(db: Db) {
    super(db, {
      channel: 'agentvm_runs',
      key: (n) => n.run_id,
      toWire: (n) => ({ f: n.finished === true }),
      fromWire: (runId, w) => ({ run_id: runId, finished: w.f === true || undefined }),
    });
  }
}
