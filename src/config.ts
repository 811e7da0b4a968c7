import path from 'node:path';
import { isIP } from 'node:net';
import { providerUrlsFromEnv, type ProviderUrls } from './harness/providers.ts';
import { parsePins } from './domain/egress.ts';
import { parseAllowHosts } from './domain/webhooks.ts';

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
  /** Guest images (content-addressed; worth keeping outside the data dir to share between installs). */
  imageDir: string;
  /** Where the egress gateway sends brokered provider requests (AGENTVM_PROVIDER_*_URL). */
  providerUrls: ProviderUrls;
  /** Names the gateway resolves to fixed addresses, exempt from the deny list (AGENTVM_EGRESS_HOSTS). */
  egressPins: Map<string, string>;
  /** The key brokered secrets are sealed with (else one generated into the data dir). */
  secretsKey?: string;
  /** Build the guest image on start when it is missing (else wait for `agentvm image build`). */
  imageAutoBuild: boolean;
  /** Start VMs from golden snapshots (off: every start is a cold boot). */
  snapshots: boolean;
  /** Standby VMs kept of the starter shape, so a new VM starts by taking one (0: none; needs snapshots). */
  standbyVms: number;
  /** Images of one's own that get a standby VM, the most recently started first (AGENTVM_STANDBY_IMAGES, default 1; 0: none). */
  standbyImages: number;
  /** Builder VMs kept ready for image builds FROM base (AGENTVM_STANDBY_BUILDERS, default 1; 0: each build starts one). */
  standbyBuilders: number;
  /**
   * The share of the host's cores that must be idle before a standby VM is made (AGENTVM_STANDBY_IDLE_SHARE,
   * 0–1, default 0.5): a standby takes CPU from the VMs already running; 0 makes them whatever the load.
   */
  standbyIdleShare: number;
  /** `all`: API and VM host in one process; `api`: a stateless API replica; `host`: a VM host. */
  role: 'all' | 'api' | 'host';
  /**
   * TLS of the internal endpoint between API replicas and VM hosts (AGENTVM_INTERNAL_TLS_CERT, _KEY, _CA):
   * PEM files of this process's certificate and key, and of the CA every host's and replica's certificate
   * is signed by. With a CA, hosts ask replicas for their certificate too (mutual TLS).
   */
  internalTls?: { certFile: string; keyFile: string; caFile?: string };
  /** How API replicas reach this host's internal endpoint (role `host`). */
  hostUrl?: string;
  /**
   * Reverse proxies in front of the server (AGENTVM_TRUSTED_PROXIES, comma-separated addresses): a
   * request from one is counted, for failed authentications, by the client X-Forwarded-For names.
   */
  trustedProxies: string[];
  /** Template disk images; with several hosts, a path every host mounts (shared storage). */
  templateDir: string;
  /** A host silent this long is lost: its VMs show `host_unavailable`, and it gets no new VMs. */
  hostStaleMs: number;
  bootTimeoutMs: number;
  meterIntervalMs: number;
  /** A run longer than this is killed (its whole process group) and answers timed_out. */
  runTimeoutMs: number;
  /** Bytes of stdout and of stderr a run keeps. */
  runOutputMaxBytes: number;
  /** Runs that may wait per VM behind the one running. */
  runQueueMax: number;
  /** SMTP for login codes; without it the server log carries them. */
  smtpUrl?: string;
  mailFrom: string;
  hostVcpus?: number;
  hostMemoryMib?: number;
  hostDiskGib?: number;
  /** Webhook hosts allowed http and private or loopback addresses (AGENTVM_WEBHOOK_ALLOW_HOSTS). */
  webhookAllowHosts: Set<string>;
  /** A webhook attempt without an answer in this long fails (AGENTVM_WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** The first webhook retry comes after about this long, doubling each time (AGENTVM_WEBHOOK_RETRY_BASE_MS). */
  webhookRetryBaseMs: number;
  /** How often idle stop, expiry and the event prune look (AGENTVM_LIFECYCLE_INTERVAL_MS). */
  lifecycleIntervalMs: number;
  /** How often a host samples each running VM's CPU, memory, disk and egress (AGENTVM_METRICS_INTERVAL_MS, at most 10 s). */
  metricsIntervalMs: number;
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, not "${raw}"`);
  return value;
}

/** A count that may be zero (0: none). */
function countFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be 0 or a positive integer, not "${raw}"`);
  return value;
}

function shareFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new Error(`${name} must be a number from 0 to 1, not "${raw}"`);
  return value;
}

function optionalInt(name: string): number | undefined {
  return process.env[name] ? intFromEnv(name, 0) : undefined;
}

function boolFromEnv(name: string): boolean {
  const raw = (process.env[name] ?? '').toLowerCase();
  if (['', '0', 'false', 'no', 'off'].includes(raw)) return false;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  throw new Error(`${name} must be on or off, not "${process.env[name]}"`);
}

function roleOf(raw: string): Config['role'] {
  if (raw === 'all' || raw === 'api' || raw === 'host') return raw;
  throw new Error(`invalid role "${raw}": use all, api or host`);
}

function internalTlsFromEnv(): Config['internalTls'] {
  const certFile = process.env.AGENTVM_INTERNAL_TLS_CERT || undefined;
  const keyFile = process.env.AGENTVM_INTERNAL_TLS_KEY || undefined;
  const caFile = process.env.AGENTVM_INTERNAL_TLS_CA || undefined;
  if (!certFile && !keyFile && !caFile) return undefined;
  if (!certFile || !keyFile) throw new Error('AGENTVM_INTERNAL_TLS_CERT and AGENTVM_INTERNAL_TLS_KEY go together (and AGENTVM_INTERNAL_TLS_CA needs both)');
  return { certFile: path.resolve(certFile), keyFile: path.resolve(keyFile), caFile: caFile && path.resolve(caFile) };
}

function trustedProxiesFromEnv(): string[] {
  const list = (process.env.AGENTVM_TRUSTED_PROXIES ?? '').split(',').map((a) => a.trim()).filter(Boolean);
  const bad = list.find((a) => isIP(a) === 0);
  if (bad) throw new Error(`AGENTVM_TRUSTED_PROXIES: "${bad}" is not an IP address (list the proxies' addresses, comma-separated)`);
  return list;
}

export function loadConfig(flags: { host?: string; port?: string | number; dataDir?: string; role?: string } = {}): Config {
  const port = Number(flags.port ?? process.env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port "${flags.port ?? process.env.PORT}"`);
  const dataDir = path.resolve(flags.dataDir ?? process.env.AGENTVM_DATA_DIR ?? './.agentvm');
  return {
    host: flags.host ?? '127.0.0.1',
    port,
    dataDir,
    databaseUrl: process.env.DATABASE_URL || undefined,
    adminToken: process.env.AGENTVM_ADMIN_TOKEN || undefined,
    rateLimitPerSecond: intFromEnv('AGENTVM_RATE_LIMIT', 50),
    rateLimitBurst: intFromEnv('AGENTVM_RATE_BURST', 100),
    logLevel: process.env.AGENTVM_LOG_LEVEL || 'info',
    imageDir: path.resolve(process.env.AGENTVM_IMAGE_DIR || path.join(dataDir, 'images')),
    providerUrls: providerUrlsFromEnv(),
    egressPins: parsePins(process.env.AGENTVM_EGRESS_HOSTS),
    secretsKey: process.env.AGENTVM_SECRETS_KEY || undefined,
    imageAutoBuild: process.env.AGENTVM_IMAGE_BUILD === undefined || process.env.AGENTVM_IMAGE_BUILD === '' ? true : boolFromEnv('AGENTVM_IMAGE_BUILD'),
    role: roleOf(flags.role ?? process.env.AGENTVM_ROLE ?? 'all'),
    internalTls: internalTlsFromEnv(),
    hostUrl: process.env.AGENTVM_HOST_URL || undefined,
    trustedProxies: trustedProxiesFromEnv(),
    templateDir: path.resolve(process.env.AGENTVM_TEMPLATE_DIR || path.join(dataDir, 'templates')),
    hostStaleMs: intFromEnv('AGENTVM_HOST_STALE_S', 30) * 1000,
    snapshots: process.env.AGENTVM_SNAPSHOTS === undefined || process.env.AGENTVM_SNAPSHOTS === '' ? true : boolFromEnv('AGENTVM_SNAPSHOTS'),
    standbyVms: countFromEnv('AGENTVM_STANDBY_VMS', 2),
    standbyBuilders: countFromEnv('AGENTVM_STANDBY_BUILDERS', 1),
    standbyImages: countFromEnv('AGENTVM_STANDBY_IMAGES', 1),
    standbyIdleShare: shareFromEnv('AGENTVM_STANDBY_IDLE_SHARE', 0.5),
    bootTimeoutMs: intFromEnv('AGENTVM_BOOT_TIMEOUT_S', 180) * 1000,
    meterIntervalMs: intFromEnv('AGENTVM_METER_INTERVAL_S', 10) * 1000,
    runTimeoutMs: intFromEnv('AGENTVM_RUN_TIMEOUT_S', 1800) * 1000,
    runOutputMaxBytes: intFromEnv('AGENTVM_RUN_OUTPUT_MAX_BYTES', 4 * 1024 * 1024),
    runQueueMax: intFromEnv('AGENTVM_RUN_QUEUE_MAX', 16),
    smtpUrl: process.env.AGENTVM_SMTP_URL || undefined,
    mailFrom: process.env.AGENTVM_MAIL_FROM || 'agentvm <noreply@localhost>',
    hostVcpus: optionalInt('AGENTVM_HOST_VCPUS'),
    hostMemoryMib: optionalInt('AGENTVM_HOST_MEMORY_MIB'),
    hostDiskGib: optionalInt('AGENTVM_HOST_DISK_GIB'),
    webhookAllowHosts: parseAllowHosts(process.env.AGENTVM_WEBHOOK_ALLOW_HOSTS),
    webhookTimeoutMs: intFromEnv('AGENTVM_WEBHOOK_TIMEOUT_MS', 10_000),
    webhookRetryBaseMs: intFromEnv('AGENTVM_WEBHOOK_RETRY_BASE_MS', 10_000),
    lifecycleIntervalMs: intFromEnv('AGENTVM_LIFECYCLE_INTERVAL_MS', 5000),
    metricsIntervalMs: Math.min(10_000, intFromEnv('AGENTVM_METRICS_INTERVAL_MS', 5000)),
  };
}
