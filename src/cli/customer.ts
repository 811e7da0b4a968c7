/**
 * The customer commands: every operation of the API through the typed client. Tables for people,
 * `--json` for scripts; errors print code, message and hint to stderr with a distinct exit code.
 */
import { Command, Option } from 'commander';
import os from 'node:os';
import { createInterface } from 'node:readline/promises';
import Table from 'cli-table3';
import { createSpinner } from 'nanospinner';
import {
  apiClient,
  call,
  ClientError,
  configPath,
  forgetLogin,
  readSavedLogin,
  resolveCredentials,
  saveLogin,
  type ApiClient,
  type Schemas,
} from '../client/client.ts';
import { ERROR_STATUS, type ErrorCode } from '../domain/errors.ts';
import { EXIT, exitCodeForStatus } from './exitCodes.ts';

/** A failure's exit code: by the HTTP status it came with, else the one its code stands for; `unreachable` had no answer. */
function exitCodeFor(err: ClientError): number {
  if (err.code === 'unreachable') return EXIT.unreachable;
  return exitCodeForStatus(err.status ?? ERROR_STATUS[err.code as ErrorCode]);
}

interface Out {
  json?: boolean;
}

function print(value: unknown, o: Out, human?: () => void): void {
  if (o.json || !human) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else human();
}

const show = (v: unknown) => (v === null || v === undefined ? '-' : Array.isArray(v) ? v.join(', ') || '-' : typeof v === 'object' ? JSON.stringify(v) : String(v));

function table(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const t = new Table({ head: columns, style: { head: [], border: [] }, chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' } });
  for (const r of rows) t.push(columns.map((c) => show(r[c])));
  process.stdout.write(`${t.toString()}\n`);
}

function record(obj: Record<string, unknown>): void {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  for (const [k, v] of Object.entries(obj)) process.stdout.write(`${k.padEnd(width)}  ${show(v)}\n`);
}

async function client(): Promise<ApiClient> {
  const { baseUrl, key } = await resolveCredentials();
  if (!key) throw new ClientError('unauthorized', 'no API key: run `agentvm login`, or set AGENTVM_API_KEY');
  return apiClient(baseUrl, key);
}

/** Runs a command body; an API error becomes `error: code: message` (+ hint) and its exit code. */
function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      if (err instanceof ClientError) {
        process.stderr.write(`error: ${err.code}${err.message ? `: ${err.message}` : ''}\n${err.hint ? `hint: ${err.hint}\n` : ''}`);
        process.exit(exitCodeFor(err));
      }
      throw err;
    }
  };
}

const VM_COLUMNS = ['vm_id', 'status', 'plan', 'tier', 'harness', 'ipv4', 'created_at'];
const TRANSITION_TARGET: Record<string, string> = {
  create: 'running',
  start: 'running',
  restart: 'running',
  reprovision: 'running',
  fork: 'running',
  stop: 'stopped',
};

/** Polls the VM until it reaches `target` (or fails), with a spinner and the elapsed time on stderr. */
async function waitFor(api: ApiClient, vmId: string, target: string, timeoutS: number): Promise<Schemas['VM']> {
  const started = Date.now();
  const spinner = createSpinner(`${vmId}: waiting for ${target}`, { stream: process.stderr }).start();
  try {
    for (;;) {
      const vm = await call(api.GET('/v1/api/vms/{id}', { params: { path: { id: vmId } } }));
      const elapsed = ((Date.now() - started) / 1000).toFixed(1);
      if (vm.status === target) {
        spinner.success({ text: `${vmId}: ${vm.status} after ${elapsed} s${vm.ipv4 ? ` (${vm.ipv4})` : ''}` });
        return vm;
      }
      if (vm.status === 'failed') {
        spinner.error({ text: `${vmId}: failed after ${elapsed} s: ${vm.status_reason ?? ''}` });
        throw new ClientError('vm_failed', `the VM failed: ${vm.status_reason ?? 'no reason given'}`);
      }
      if (Date.now() - started > timeoutS * 1000) {
        spinner.error({ text: `${vmId}: still ${vm.status} after ${elapsed} s` });
        throw new ClientError('timeout', `the VM did not reach ${target} within ${timeoutS} s`, 'check `agentvm vms get`');
      }
      spinner.update({ text: `${vmId}: ${vm.status}, ${elapsed} s` });
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    spinner.stop();
  }
}

const jsonOpt = () => new Option('--json', 'print JSON (for scripts)');
const waitOpts = (cmd: Command) =>
  cmd.option('--wait', 'wait until the transition is done, with a spinner').option('--timeout <seconds>', 'how long --wait waits', '600');

async function prompt(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

export function customerCommands(program: Command): void {
  program
    .command('whoami')
    .description('show the tenant and key you are using')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm whoami')
    .action(action(async (o: Out) => {
      const me = await call((await client()).GET('/v1/api/whoami'));
      print(me, o, () => record(me));
    }));

  const harnesses = program.command('harnesses').description('agent runtimes a VM can carry');
  harnesses
    .command('list')
    .description('list the harnesses')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm harnesses list')
    .action(action(async (o: Out) => {
      const list = await call((await client()).GET('/v1/api/harnesses'));
      print(list, o, () => table(list.data.map((h) => ({ ...h, auth: h.auth.mode, default: h.default ? 'yes' : '' })), ['id', 'display_name', 'auth', 'providers', 'default']));
    }));
  harnesses
    .command('get <name>')
    .description('show one harness')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm harnesses get claude-code')
    .action(action(async (name: string, o: Out) => {
      const h = await call((await client()).GET('/v1/api/harnesses/{name}', { params: { path: { name } } }));
      print(h, o, () => record({ ...h, auth: `${h.auth.mode}${h.auth.env.length ? ` (${h.auth.env.join(', ')})` : ''}${h.auth.login_command ? ` (${h.auth.login_command})` : ''}` }));
    }));

  const vms = program.command('vms').description('your VMs');
  vms
    .command('list')
    .description('list your VMs, newest first')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms list')
    .action(action(async (o: Out) => {
      const list = await call((await client()).GET('/v1/api/vms'));
      print(list, o, () => table(list.data, VM_COLUMNS));
    }));
  vms
    .command('get <vm_id>')
    .description('show one VM')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms get vm_…')
    .action(action(async (id: string, o: Out) => {
      const vm = await call((await client()).GET('/v1/api/vms/{id}', { params: { path: { id } } }));
      print(vm, o, () => record(vm));
    }));
  waitOpts(
    vms
      .command('create')
      .description('provision a VM (charges the card for a plan, or needs prepaid credits for a tier)')
      .option('--plan <plan>', 'starter, pro or max')
      .option('--cycle <cycle>', 'monthly or annual')
      .option('--tier <tier>', 'ondemand or spot (prepaid credits instead of a plan)')
      .option('--harness <id>', 'harness id (default: the platform default)')
      .option('--count <n>', 'a spot swarm of n VMs')
      .option('--egress <mode>', "none, allowlist or public (default: allowlist of the harness's provider hosts)")
      .option('--allow <host...>', 'hosts the VM may reach (allowlist mode); *.example.com for subdomains')
      .option('--idempotency-key <key>', 'retry safely: the first answer is replayed, the charge happens once')
      .addOption(jsonOpt())
      .addHelpText('after', '\nExamples:\n  agentvm vms create --harness echo --wait\n  agentvm vms create --tier spot --count 5\n  agentvm vms create --allow api.anthropic.com registry.npmjs.org'),
  ).action(action(async (o: Out & { plan?: string; cycle?: string; tier?: string; harness?: string; count?: string; egress?: string; allow?: string[]; idempotencyKey?: string; wait?: boolean; timeout: string }) => {
    const api = await client();
    const body: Schemas['CreateVMRequest'] = {};
    if (o.plan) body.plan = o.plan as never;
    if (o.cycle) body.cycle = o.cycle as never;
    if (o.tier) body.tier = o.tier as never;
    if (o.harness) body.harness = o.harness;
    if (o.count) body.count = Number(o.count);
    if (o.egress || o.allow) body.egress = { mode: (o.egress ?? 'allowlist') as never, allow: o.allow ?? [] };
    const created = await call(api.POST('/v1/api/vms', { body, params: { header: o.idempotencyKey ? { 'Idempotency-Key': o.idempotencyKey } : {} } as never }));
    if (!o.wait) return print(created, o, () => record(created));
    const ids = created.vm_ids ?? [created.vm_id];
    const done: Schemas['VM'][] = [];
    for (const id of ids) done.push(await waitFor(api, id, 'running', Number(o.timeout)));
    print(ids.length > 1 ? done : done[0], o, () => (ids.length > 1 ? table(done, VM_COLUMNS) : record(done[0])));
  }));
  for (const verb of ['stop', 'start', 'restart', 'reprovision'] as const) {
    const what = {
      stop: 'stop a VM (the persist disk stays)',
      start: 'start a stopped VM',
      restart: 'restart a VM with a fresh root filesystem (the persist disk stays)',
      reprovision: 'rebuild the guest from the current image (the persist disk stays)',
    }[verb];
    waitOpts(vms.command(`${verb} <vm_id>`).description(what).addOption(jsonOpt()).addHelpText('after', `\nExample:\n  agentvm vms ${verb} vm_… --wait`)).action(
      action(async (id: string, o: Out & { wait?: boolean; timeout: string }) => {
        const api = await client();
        const vm = await call(api.POST(`/v1/api/vms/{id}/${verb}`, { params: { path: { id } } }));
        const final = o.wait ? await waitFor(api, id, TRANSITION_TARGET[verb], Number(o.timeout)) : vm;
        print(final, o, () => record(final));
      }),
    );
  }
  vms
    .command('destroy <vm_id>')
    .description('destroy a VM: metering stops and its disks are removed')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms destroy vm_…')
    .action(action(async (id: string, o: Out) => {
      const vm = await call((await client()).DELETE('/v1/api/vms/{id}', { params: { path: { id } } }));
      print(vm, o, () => record(vm));
    }));
  vms
    .command('run <vm_id> <task...>')
    .description("run one task with the VM's harness; prints the task's output")
    .option('--model <model>', 'model for the harness')
    .option('--provider <provider>', 'provider for the harness')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExamples:\n  agentvm vms run vm_… "add a test for the parser"\n  agentvm vms run vm_… hello --json')
    .action(action(async (id: string, words: string[], o: Out & { model?: string; provider?: string }) => {
      const body: Schemas['RunTaskRequest'] = { task: words.join(' ') };
      if (o.model) body.model = o.model;
      if (o.provider) body.provider = o.provider;
      const r = await call((await client()).POST('/v1/api/vms/{id}/run', { params: { path: { id } }, body }));
      print(r, o, () => {
        process.stdout.write(r.stdout);
        process.stderr.write(r.stderr);
        if (r.timed_out) process.stderr.write(`agentvm: the task timed out after ${r.duration_ms} ms\n`);
        else if (r.exit_code !== 0) process.stderr.write(`agentvm: the task exited with ${r.exit_code}\n`);
      });
    }));
  vms
    .command('secrets <vm_id>')
    .description("set or remove the harness's bring-your-own-key variables (values are never shown again)")
    .option('--set <NAME=VALUE...>', 'set a variable')
    .option('--unset <NAME...>', 'remove a variable')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms secrets vm_… --set ANTHROPIC_API_KEY=sk-ant-… --unset OLD_KEY')
    .action(action(async (id: string, o: Out & { set?: string[]; unset?: string[] }) => {
      const body: Record<string, string | null> = {};
      for (const pair of o.set ?? []) {
        const eq = pair.indexOf('=');
        if (eq <= 0) throw new ClientError('invalid_request', `--set ${pair}: expected NAME=VALUE`);
        body[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      for (const name of o.unset ?? []) body[name] = null;
      const vm = await call((await client()).PUT('/v1/api/vms/{id}/secrets', { params: { path: { id } }, body }));
      print(vm, o, () => record({ vm_id: vm.vm_id, secret_names: vm.secret_names, brokered: vm.brokered_secret_names }));
    }));

  vms
    .command('egress <vm_id>')
    .description("show or change what the VM may reach through its gateway (applies to new connections at once)")
    .option('--mode <mode>', 'none, allowlist or public')
    .option('--allow <host...>', 'replace the allowlist (*.example.com allows its subdomains)')
    .option('--add <host...>', 'add hosts to the allowlist')
    .option('--remove <host...>', 'remove hosts from the allowlist')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExamples:\n  agentvm vms egress vm_…\n  agentvm vms egress vm_… --add registry.npmjs.org "*.githubusercontent.com"\n  agentvm vms egress vm_… --mode none')
    .action(action(async (id: string, o: Out & { mode?: string; allow?: string[]; add?: string[]; remove?: string[] }) => {
      const api = await client();
      let vm = await call(api.GET('/v1/api/vms/{id}', { params: { path: { id } } }));
      if (o.mode || o.allow || o.add || o.remove) {
        const drop = new Set(o.remove ?? []);
        const allow = [...(o.allow ?? vm.egress.allow), ...(o.add ?? [])].filter((h) => !drop.has(h));
        const body = { mode: (o.mode ?? vm.egress.mode) as Schemas['Egress']['mode'], allow: [...new Set(allow)] };
        vm = await call(api.PUT('/v1/api/vms/{id}/egress', { params: { path: { id } }, body }));
      }
      print(vm.egress, o, () => record({ vm_id: vm.vm_id, mode: vm.egress.mode, allow: vm.egress.allow.join(' ') || '(nothing)', brokered: vm.brokered_secret_names.join(' ') || '(none)' }));
    }));
  vms
    .command('egress-log <vm_id>')
    .description("the VM's connections through its gateway, newest first (kept 7 days)")
    .option('--limit <n>', '1-200', '50')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms egress-log vm_… --limit 20')
    .action(action(async (id: string, o: Out & { limit: string }) => {
      const log = await call((await client()).GET('/v1/api/vms/{id}/egress/log', { params: { path: { id }, query: { limit: Number(o.limit) } } }));
      print(log, o, () => table(log.data, ['at', 'decision', 'host', 'port', 'reason', 'bytes_out', 'bytes_in']));
    }));

  const templates = program.command('templates').description('the template gallery');
  templates
    .command('list')
    .description('your templates and the public gallery')
    .option('--q <text>', 'full-text search')
    .option('--harness <id>', 'only this harness')
    .option('--tag <tag>', 'only this tag')
    .option('--sort <sort>', 'trending, new, forks or stars')
    .option('--limit <n>', 'page size (1–100)')
    .option('--offset <n>', 'page start')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm templates list --q python --sort stars')
    .action(action(async (o: Out & { q?: string; harness?: string; tag?: string; sort?: string; limit?: string; offset?: string }) => {
      const query: Record<string, string | number> = {};
      for (const k of ['q', 'harness', 'tag', 'sort'] as const) if (o[k]) query[k] = o[k]!;
      if (o.limit) query.limit = Number(o.limit);
      if (o.offset) query.offset = Number(o.offset);
      const page = await call((await client()).GET('/v1/api/templates', { params: { query: query as never } }));
      print(page, o, () => {
        table(page.data, ['template_id', 'slug', 'name', 'harness', 'visibility', 'forks', 'stars', 'status']);
        process.stdout.write(`${page.total} in all${page.has_more ? `; next page: --offset ${page.next_offset}` : ''}\n`);
      });
    }));
  templates
    .command('get <template>')
    .description('show a template (by tpl_ id, your slug or a public slug)')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm templates get python-starter')
    .action(action(async (id: string, o: Out) => {
      const t = await call((await client()).GET('/v1/api/templates/{id}', { params: { path: { id } } }));
      print(t, o, () => record(t));
    }));
  waitOpts(
    templates
      .command('fork <template>')
      .description('make a VM from a template (charges the card)')
      .option('--plan <plan>', 'plan for the new VM (default: the template\'s)')
      .addOption(jsonOpt())
      .addHelpText('after', '\nExample:\n  agentvm templates fork python-starter --wait'),
  ).action(action(async (id: string, o: Out & { plan?: string; wait?: boolean; timeout: string }) => {
    const api = await client();
    const forked = await call(api.POST('/v1/api/templates/{id}/fork', { params: { path: { id } }, body: o.plan ? { plan: o.plan as never } : {} }));
    const final = o.wait ? await waitFor(api, forked.vm_id, 'running', Number(o.timeout)) : forked;
    print(final, o, () => record(final));
  }));
  templates
    .command('capture <vm_id>')
    .description("capture a VM's persist disk as a template (public captures are scrubbed of secrets)")
    .option('--public', 'publish it in the gallery')
    .option('--name <name>', 'template name')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm templates capture vm_… --name "my setup"')
    .action(action(async (id: string, o: Out & { public?: boolean; name?: string }) => {
      const body: Schemas['CaptureRequest'] = { visibility: o.public ? 'public' : 'private' };
      if (o.name) body.name = o.name;
      const t = await call((await client()).POST('/v1/api/vms/{id}/capture', { params: { path: { id } }, body }));
      print(t, o, () => record(t));
    }));

  program
    .command('billing')
    .description('card on file and prepaid credits')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm billing --json')
    .action(action(async (o: Out) => {
      const b = await call((await client()).GET('/v1/api/billing'));
      print(b, o, () => record(b));
    }));
  program
    .command('usage')
    .description('VM counts, monthly recurring revenue and credits')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm usage')
    .action(action(async (o: Out) => {
      const u = await call((await client()).GET('/v1/api/usage'));
      print(u, o, () => record({ ...u.vms, mrr_cents: u.mrr.amount_cents, credits_cents: u.credits.balance_cents, spent_month_cents: u.credits.spent_month_cents }));
    }));

  const keys = program.command('keys').description('API keys');
  keys
    .command('list')
    .description('list your keys (metadata only)')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm keys list')
    .action(action(async (o: Out) => {
      const list = await call((await client()).GET('/v1/api/keys'));
      print(list, o, () => table(list.data, ['key_id', 'prefix', 'label', 'scope', 'created_at', 'last_used_at']));
    }));
  keys
    .command('issue')
    .description('issue a key for automation; its plaintext is shown once')
    .option('--label <label>', 'what it is for')
    .addOption(new Option('--scope <scope>', 'read or readwrite').choices(['read', 'readwrite']).default('read'))
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm keys issue --label ci --scope readwrite')
    .action(action(async (o: Out & { label?: string; scope: 'read' | 'readwrite' }) => {
      const k = await call((await client()).POST('/v1/api/keys', { body: { label: o.label, scope: o.scope } }));
      print(k, o, () => record(k));
    }));
  keys
    .command('revoke <key_id>')
    .description('revoke a key (refused everywhere within a second)')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm keys revoke key_…')
    .action(action(async (id: string, o: Out) => {
      const k = await call((await client()).DELETE('/v1/api/keys/{key_id}', { params: { path: { key_id: id } } }));
      print(k, o, () => record(k));
    }));

  program
    .command('login')
    .description('log in with a one-time code sent to your account email; saves a new readwrite key')
    .option('--email <email>', 'account email (asked for when missing)')
    .option('--code <code>', 'the code (asked for when missing)')
    .addOption(jsonOpt())
    .addHelpText('after', `\nThe key is saved in ${configPath()} (mode 0600).\nExample:\n  agentvm login --email you@example.com`)
    .action(action(async (o: Out & { email?: string; code?: string }) => {
      const { baseUrl } = await resolveCredentials();
      const api = apiClient(baseUrl);
      const email = o.email || (await prompt('email: '));
      const started = await call(api.POST('/v1/auth/login/start', { body: { email } }));
      process.stderr.write(`a code is on its way to ${email} (valid ${Math.round(started.expires_in_s / 60)} minutes)\n`);
      const code = o.code || (await prompt('code: '));
      const key = await call(api.POST('/v1/auth/login/complete', { body: { email, code, label: `cli on ${os.hostname()}` } }));
      await saveLogin({ base_url: baseUrl, api_key: key.key, key_id: key.key_id, email });
      const out = { key_id: key.key_id, prefix: key.prefix, scope: key.scope, saved_to: configPath() };
      print(out, o, () => process.stdout.write(`logged in as ${email}; key ${key.prefix}… saved to ${configPath()}\n`));
    }));
  program
    .command('logout')
    .description('revoke the saved key and forget it')
    .addHelpText('after', '\nExample:\n  agentvm logout')
    .action(action(async () => {
      const saved = await readSavedLogin();
      if (!saved) {
        process.stdout.write('not logged in\n');
        return;
      }
      try {
        await call(apiClient(saved.base_url, saved.api_key).DELETE('/v1/api/keys/{key_id}', { params: { path: { key_id: saved.key_id } } }));
      } catch (err) {
        // A key already revoked, or a server gone: forget it all the same.
        if (!(err instanceof ClientError) || !['unauthorized', 'not_found', 'unreachable'].includes(err.code)) throw err;
      }
      await forgetLogin();
      process.stdout.write('logged out\n');
    }));
}
