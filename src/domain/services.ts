import type { Db } from '../store/db.ts';
import { systemClock, type Clock } from './clock.ts';
import { KeyService } from './keys.ts';
import { TenantService } from './tenants.ts';
import { BillingService } from './billing.ts';
import { UsageService } from './usage.ts';
import { VmService } from './vms.ts';
import { HostService } from './hosts.ts';
import { RunService, type RunLimits } from './runs.ts';
import { LoginService, type Mailer } from './login.ts';
import { TemplateService } from './templates.ts';
import { LedgerPaymentProvider, type PaymentProvider } from './payments.ts';
import type { DriverProbe } from '../vmm/probe.ts';

export const DEFAULT_RUN_LIMITS: RunLimits = { timeoutMs: 30 * 60_000, maxOutputBytes: 4 * 1024 * 1024, maxQueued: 16 };

/** The domain, wired: what handlers call. */
export interface Services {
  db: Db;
  clock: Clock;
  keys: KeyService;
  tenants: TenantService;
  billing: BillingService;
  usage: UsageService;
  vms: VmService;
  hosts: HostService;
  runs: RunService;
  login: LoginService;
  templates: TemplateService;
  driver: () => Promise<DriverProbe>;
}

export function buildServices(
  db: Db,
  opts: { clock?: Clock; payments?: PaymentProvider; driver: () => Promise<DriverProbe>; runLimits?: RunLimits; mailer?: Mailer },
): Services {
  const clock = opts.clock ?? systemClock;
  const keys = new KeyService(db, clock);
  const billing = new BillingService(db, clock, opts.payments ?? new LedgerPaymentProvider());
  const hosts = new HostService(db, clock);
  const templates = new TemplateService(db, clock);
  const vms = new VmService(db, clock, billing, hosts, templates);
  return {
    db,
    hosts,
    clock,
    keys,
    tenants: new TenantService(db, clock, keys),
    billing,
    usage: new UsageService(db, clock),
    vms,
    runs: new RunService(db, clock, vms, opts.runLimits ?? DEFAULT_RUN_LIMITS),
    login: new LoginService(db, clock, keys, opts.mailer ?? { send: async () => undefined }),
    templates,
    driver: opts.driver,
  };
}
