import path from 'node:path';

/** Every setting, with its environment variable. The README's configuration table mirrors this. */
export interface Config {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl?: string;
  adminToken?: string;
  /** Sustained requests per second allowed per API key, and the burst above it. */
  rateLimitPerSecond: number;
  rateLimitBurst: number;
  logLevel: string;
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, not "${raw}"`);
  return value;
}

export function loadConfig(flags: { host?: string; port?: string | number; dataDir?: string } = {}): Config {
  const port = Number(flags.port ?? process.env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port "${flags.port ?? process.env.PORT}"`);
  return {
    host: flags.host ?? '127.0.0.1',
    port,
    dataDir: path.resolve(flags.dataDir ?? process.env.AGENTVM_DATA_DIR ?? './.agentvm'),
    databaseUrl: process.env.DATABASE_URL || undefined,
    adminToken: process.env.AGENTVM_ADMIN_TOKEN || undefined,
    rateLimitPerSecond: intFromEnv('AGENTVM_RATE_LIMIT', 50),
    rateLimitBurst: intFromEnv('AGENTVM_RATE_BURST', 100),
    logLevel: process.env.AGENTVM_LOG_LEVEL || 'info',
  };
}
