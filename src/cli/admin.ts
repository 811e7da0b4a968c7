import { Command } from 'commander';
import { EXIT, exitCodeForStatus } from './exitCodes.ts';
import { DEFAULT_LIMITS, LIMIT_NAMES, MAX_LIMIT } from '../domain/limits.ts';

/** `agentvm admin …`: the operator API over HTTP (AGENTVM_BASE_URL, AGENTVM_ADMIN_TOKEN). */
export function adminCommands(): Command {
  const admin = new Command('admin').description('operator commands (need AGENTVM_ADMIN_TOKEN)');
  const call = async (method: string, path: string, body?: unknown, json = false, show?: (payload: Record<string, unknown>) => void) => {
    const base = (process.env.AGENTVM_BASE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
    const token = process.env.AGENTVM_ADMIN_TOKEN;
    if (!token) fail('AGENTVM_ADMIN_TOKEN is not set (the server writes one to <data-dir>/admin-token)', EXIT.usage);
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch (err) {
      fail(`cannot reach ${base}: ${(err as Error).message}`, EXIT.unreachable);
    }
    const payload = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok) {
      fail(`${payload.error ?? res.status}: ${payload.message ?? ''}${payload.hint ? `\nhint: ${payload.hint}` : ''}`, exitCodeForStatus(res.status));
    }
    if (json) process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`);
    else if (show) show(payload);
    else for (const [k, v] of Object.entries(payload)) process.stdout.write(`${k}: ${v === null ? '-' : v}\n`);
  };

  const tenants = admin.command('tenants').description('tenants');
  tenants
    .command('create')
    .description('create a tenant and print its first readwrite key')
    .requiredOption('--email <email>', 'account email')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  agentvm admin tenants create --email dev@example.com')
    .action((o: { email: string; json?: boolean }) => call('POST', '/v1/admin/tenants', { email: o.email }, o.json));

  const card = admin.command('card').description('the card on file');
  card
    .command('set')
    .description("put a card on a tenant's file")
    .requiredOption('--tenant <tenant_id>', 'tenant id')
    .requiredOption('--brand <brand>', 'card brand, e.g. visa')
    .requiredOption('--last4 <digits>', 'last four digits (0002 is declined)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  agentvm admin card set --tenant ten_… --brand visa --last4 4242')
    .action((o: { tenant: string; brand: string; last4: string; json?: boolean }) =>
      call('PUT', `/v1/admin/tenants/${encodeURIComponent(o.tenant)}/card`, { brand: o.brand, last4: o.last4 }, o.json),
    );
  card
    .command('remove')
    .description("remove a tenant's card")
    .requiredOption('--tenant <tenant_id>', 'tenant id')
    .option('--json', 'print JSON')
    .action((o: { tenant: string; json?: boolean }) => call('DELETE', `/v1/admin/tenants/${encodeURIComponent(o.tenant)}/card`, undefined, o.json));

  admin
    .command('credits')
    .description('prepaid credits')
    .command('add')
    .description('add prepaid credits to a tenant')
    .requiredOption('--tenant <tenant_id>', 'tenant id')
    .requiredOption('--cents <n>', 'amount in US cents')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  agentvm admin credits add --tenant ten_… --cents 5000')
    .action((o: { tenant: string; cents: string; json?: boolean }) => {
      const cents = Number(o.cents);
      if (!Number.isInteger(cents) || cents <= 0) fail('--cents must be a positive whole number', EXIT.invalid);
      return call('POST', `/v1/admin/tenants/${encodeURIComponent(o.tenant)}/credits`, { amount_cents: cents }, o.json);
    });

  const limits = admin
    .command('limits')
    .description("a tenant's limits and quotas")
    .command('set')
    .description("change some of a tenant's limits (the others keep theirs); `default` gives one back its default")
    .requiredOption('--tenant <tenant_id>', 'tenant id')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  agentvm admin limits set --tenant ten_… --vms 200 --running-vms 50 --disk-gib default');
  for (const name of LIMIT_NAMES) limits.option(`--${name.replace(/_/g, '-')} <n>`, `${name} (default ${DEFAULT_LIMITS[name]})`);
  limits.action((o: Record<string, string | boolean | undefined>) => {
    const body: Record<string, number | null> = {};
    for (const name of LIMIT_NAMES) {
      const given = o[name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())];
      if (typeof given !== 'string') continue;
      const n = Number(given);
      if (given === 'default') body[name] = null;
      else if (Number.isInteger(n) && n >= 0 && n <= MAX_LIMIT && given.trim() !== '') body[name] = n;
      else fail(`--${name.replace(/_/g, '-')} must be a whole number from 0 to ${MAX_LIMIT}, or default`, EXIT.invalid);
    }
    if (Object.keys(body).length === 0) fail('give at least one limit to change, e.g. --vms 100', EXIT.usage);
    return call('PUT', `/v1/admin/tenants/${encodeURIComponent(o.tenant as string)}/limits`, body, o.json === true, (payload) => {
      const view = payload as { limits: Record<string, number>; usage: Record<string, number> };
      for (const name of LIMIT_NAMES) process.stdout.write(`${name}: ${view.limits[name]} (used ${view.usage[name]})\n`);
    });
  });
  return admin;
}

function fail(message: string, code: number): never {
  process.stderr.write(`error: ${message}\n`);
  process.exit(code);
}
