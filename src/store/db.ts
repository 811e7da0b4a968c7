import { readdir, readFile, mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';

/** Something SQL can run on: the database itself or one open transaction. */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /**
   * Calls `fn` with the payload of each NOTIFY on `channel`, from any process on the same database.
   * PostgreSQL only (an embedded database has one process: it has nothing to hear); answers how to stop.
   */
  listen?(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

// Both drivers hand back int8 and numeric as JS numbers: every such column here holds cents or counts.
const INT8 = 20;
const NUMERIC = 1700;
const toNumber = (v: string) => (v === null ? null : Number(v));

class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  constructor(private readonly pglite: PGlite) {}

  dump(): Promise<Blob> {
    return this.pglite.dumpDataDir('none');
  }

  async query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await this.pglite.query<T>(sql, params)).rows;
  }
  async exec(sql: string): Promise<void> {
    await this.pglite.exec(sql);
  }
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pglite.transaction((tx) =>
      fn({
        query: async <R>(sql: string, params: unknown[] = []) => (await tx.query<R>(sql, params)).rows,
        exec: async (sql: string) => {
          await tx.exec(sql);
        },
      }),
    );
  }
  async close(): Promise<void> {
    if (!this.pglite.closed) await this.pglite.close();
  }
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  constructor(
    private readonly pool: pg.Pool,
    private readonly url: string,
  ) {}

  /** One connection of its own, LISTENing; a lost connection is made again a second later. */
  async listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    let client: pg.Client | null = null;
    let stopped = false;
    const connect = async (): Promise<void> => {
      const c = new pg.Client({ connectionString: this.url });
      c.on('notification', (n) => n.channel === channel && fn(n.payload ?? ''));
      c.on('error', () => undefined);
      c.on('end', () => {
        if (client === c) client = null;
        if (!stopped) setTimeout(() => void connect().catch(() => undefined), 1000).unref();
      });
      await c.connect();
      await c.query(`LISTEN ${channel}`);
      if (stopped) await c.end();
      else client = c;
    };
    await connect();
    return async () => {
      stopped = true;
      await client?.end().catch(() => undefined);
    };
  }

  async query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await this.pool.query(sql, params)).rows as T[];
  }
  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }
  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn({
        query: async <R>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as R[],
        exec: async (sql: string) => {
          await client.query(sql);
        },
      });
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }
  async close(): Promise<void> {
    await this.pool.end();
  }
}

export interface OpenDbOptions {
  /** `postgres://` URL of a PostgreSQL server; when absent the embedded PGlite is used. */
  databaseUrl?: string;
  /** Where PGlite keeps its files; `memory://` keeps them in memory (tests). */
  pgliteDir?: string;
  /** An embedded database to start from, made by `dumpDb` (tests: a migrated copy opens in a fraction of initdb's time). */
  pgliteDump?: Blob;
}

/** A copy of an embedded database's files, for `openDb({ pgliteDump })`. */
export async function dumpDb(db: Db): Promise<Blob> {
  if (!(db instanceof PgliteDb)) throw new Error('only an embedded database can be dumped');
  return db.dump();
}

let pgliteSet = false;

/**
 * The embedded Postgres is WebAssembly, compiled by V8: each function when first called, by its baseline
 * compiler only. Its optimising tier spent seconds of CPU on Postgres's large functions after each start
 * and held ~50 MiB of code, for no gain measured on the small queries of a control plane.
 */
function pgliteProcessSettings(): void {
  if (pgliteSet) return;
  pgliteSet = true;
  setFlagsFromString('--liftoff-only');
  setFlagsFromString('--wasm-lazy-compilation');
}

export async function openDb(opts: OpenDbOptions): Promise<Db> {
  let db: Db;
  if (opts.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: opts.databaseUrl,
      max: 10,
      types: {
        getTypeParser: ((oid: number, format?: string) =>
          oid === INT8 || oid === NUMERIC ? toNumber : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // An idle client that loses its server must not crash the process; the next query reconnects.
    pool.on('error', () => undefined);
    db = new PostgresDb(pool, opts.databaseUrl);
  } else {
    const dir = opts.pgliteDir ?? 'memory://';
    if (!dir.startsWith('memory://')) await mkdir(dir, { recursive: true });
    pgliteProcessSettings();
    const pglite = await PGlite.create(dir, {
      parsers: { [INT8]: toNumber, [NUMERIC]: toNumber },
      loadDataDir: opts.pgliteDump,
      // Its buffer pool is memory of this process, zeroed at start: 16 MiB rather than Postgres's 128 holds
      // a control plane's hot rows (the rest is read from the files, through the OS's page cache).
      startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'],
    });
    db = new PgliteDb(pglite);
  }
  await migrate(db);
  return db;
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Applies every migration not yet applied, in order, each in its own transaction, one migrator at a time. */
export async function migrate(db: Db): Promise<number[]> {
  await db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const applied: number[] = [];
  for (const file of files) {
    const version = Number.parseInt(file, 10);
    const sql = await readFile(path.join(MIGRATIONS_DIR, file), 'utf8');
    await db.transaction(async (tx) => {
      // The table lock serialises replicas that start at once against one PostgreSQL server.
      await tx.exec('LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE');
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [version]);
      if (done.length > 0) return;
      await tx.exec(sql);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [version, file]);
      applied.push(version);
    });
  }
  return applied;
}

/** PostgreSQL's SQLSTATE for a unique violation, the same from both drivers. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505';
}
