import type { Db } from '../store/db.ts';
import { systemClock, type Clock } from './clock.ts';
import { KeyService } from './keys.ts';
import { TenantService } from './tenants.ts';
import { BillingService } from './billing.ts';
import { UsageService } from './usage.ts';
import { VmService } from './vms.ts';
import { HostService } from './hosts.ts';
import { TemplateService } from './templates.ts';
import { LedgerPaymentProvider, type PaymentProvider } from './payments.ts';
import type { DriverProbe } from '../vmm/probe.ts';

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
  templates: TemplateService;
  driver: () => Promise<DriverProbe>;
}

export function buildServices(
  db: Db,
  opts: { clock?: Clock; payments?: PaymentProvider; driver: () => Promise<DriverProbe> },
): Services {
  const clock = opts.clock ?? systemClock;
  const keys = new KeyService(db, clock);
  const billing = new BillingService(db, clock, opts.payments ?? new LedgerPaymentProvider());
  const hosts = new HostService(db, clock);
  return {
    db,
    hosts,
    clock,
    keys,
    tenants: new TenantService(db, clock, keys),
    billing,
    usage: new UsageService(db, clock),
    vms: new VmService(db, clock, billing, hosts),
    templates: new TemplateService(db, clock),
    driver: opts.driver,
  };
}
