/**
 * The customer commands. Most are one operation each, made from its descriptor and its `cli` hints
 * (src/cli/operationCommands.ts).
 * Written by hand only where a person's habit asks for more than one call: login and logout, `--wait`
 * on a create or a fork, a run's output, secrets as NAME=VALUE, editing the egress policy, a terminal,
 * and copying files.
 */
import { Command, Option } from 'commander';
import os from 'node:os';
import { createInterface } from 'node:readline/promises';
import {
  apiClient,
  call,
  ClientError,
  configPath,
  forgetLogin,
  readSavedLogin,
  resolveCredentials,
  saveLogin,
  type Schemas,
} from '../client/client.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { addCommands, type AnswerView, type HandWrittenEntry } from './operationCommands.ts';
import type { OperationSpec } from './operationSpec.ts';
import { print, record, table, type Out } from './output.ts';
import { addWaitOptions, waitForVm } from './waitForVm.ts';
import { oneLine, renderRun, runsLogs, vmsRun } from './runs.ts';
import { events, vmsUpdate } from './lifecycle.ts';
import { download, parseRemote, upload } from './copy.ts';
import { imagesBuild, imagesGet } from './images.ts';
import { vmsForward, vmsOpen, vmsUrl } from './previews.ts';

const VM_COLUMNS = ['vm_id', 'status', 'plan', 'tier', 'harness', 'ipv4', 'created_at'];

/** Descriptions of the command groups. */
const GROUPS: Record<string, string> = {
  harnesses: 'agent runtimes a VM can carry',
  vms: 'your VMs',
  templates: 'the template gallery',
  keys: 'API keys',
  runs: "a VM's task runs: list, inspect, follow, cancel",
  webhooks: 'where your events are POSTed, signed, and how each delivery went',
  billing: 'card on file and credits; `billing ledger` lists every charge and draw',
  images: 'what a VM starts with: the base workstation image, or one of yours built from a Dockerfile',
  snapshots: "a running VM's memory, devices and disks, kept: start new VMs from it any time",
};

const jsonOpt = () => new Option('--json', 'print JSON (for scripts)');

function vmsCreate(cmd: Command): void {
  addWaitOptions(
    cmd
      .description('provision a VM (charges the card for a plan, or needs prepaid credits for a tier)')
      .option('--plan <plan>', 'starter, pro or max')
      .option('--cycle <cycle>', 'monthly or annual')
      .option('--tier <tier>', 'ondemand or spot (prepaid credits instead of a plan)')
      .option('--harness <id>', 'harness id (default: the platform default)')
      .option('--count <n>', 'a spot swarm of n VMs')
      .option('--egress <mode>', "none, allowlist or public (default: allowlist of the harness's provider hosts)")
      .option('--allow <host...>', 'hosts the VM may reach (allowlist mode); *.example.com for subdomains; presets @debian @npm @pypi @github @crates @go')
      .option('--image <image>', 'the image its root starts from: an img_ id or a slug (default: base)')
      .option('--idempotency-key <key>', 'retry safely: the first answer is replayed, the charge happens once')
      .addOption(jsonOpt())
      .addHelpText('after', '\nExamples:\n  agentvm vms create --harness echo --wait\n  agentvm vms create --tier spot --count 5\n  agentvm vms create --allow api.anthropic.com @npm @github\n  agentvm vms create --image team-python --wait'),
  ).action(apiAction(async (o: Out & { plan?: string; cycle?: string; tier?: string; harness?: string; count?: string; egress?: string; allow?: string[]; image?: string; idempotencyKey?: string; wait?: boolean; timeout: string }) => {
    const api = await customerClient();
    const body: Schemas['CreateVMRequest'] = {};
    if (o.plan) body.plan = o.plan as never;
    if (o.cycle) body.cycle = o.cycle as never;
    if (o.tier) body.tier = o.tier as never;
    if (o.harness) body.harness = o.harness;
    if (o.count) body.count = Number(o.count);
    if (o.image) body.image = o.image;
    if (o.egress || o.allow) body.egress = { mode: (o.egress ?? 'allowlist') as never, allow: o.allow ?? [] };
    const created = await call(api.POST('/v1/api/vms', { body, params: { header: o.idempotencyKey ? { 'Idempotency-Key': o.idempotencyKey } : {} } as never }));
    if (!o.wait) return print(created, o, () => record(created));
    const ids = created.vm_ids ?? [created.vm_id];
    const done: Schemas['VM'][] = [];
    for (const id of ids) done.push(await waitForVm(api, id, 'running', Number(o.timeout)));
    print(ids.length > 1 ? done : done[0], o, () => (ids.length > 1 ? table(done, VM_COLUMNS) : record(done[0])));
  }));
}

function vmsSecrets(cmd: Command): void {
  cmd
    .description("set or remove the harness's bring-your-own-key variables (values are never shown again)")
    .argument('<vm_id>')
    .option('--set <NAME=VALUE...>', 'set a variable')
    .option('--unset <NAME...>', 'remove a variable')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms secrets vm_… --set ANTHROPIC_API_KEY=sk-ant-… --unset OLD_KEY')
    .action(apiAction(async (id: string, o: Out & { set?: string[]; unset?: string[] }) => {
      const body: Record<string, string | null> = {};
      for (const pair of o.set ?? []) {
        const eq = pair.indexOf('=');
        if (eq <= 0) throw new ClientError('invalid_request', `--set ${pair}: expected NAME=VALUE`);
        body[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      for (const name of o.unset ?? []) body[name] = null;
      const vm = await call((await customerClient()).PUT('/v1/api/vms/{id}/secrets', { params: { path: { id } }, body }));
      print(vm, o, () => record({ vm_id: vm.vm_id, secret_names: vm.secret_names, brokered: vm.brokered_secret_names }));
    }));
}

/** Shows the policy, or changes it by reading the VM's and writing it back with the edits. */
function vmsEgress(cmd: Command): void {
  cmd
    .description('show or change what the VM may reach through its gateway (applies to new connections at once)')
    .argument('<vm_id>')
    .option('--mode <mode>', 'none, allowlist or public')
    .option('--allow <host...>', 'replace the allowlist (*.example.com allows its subdomains)')
    .option('--add <host...>', 'add hosts to the allowlist')
    .option('--remove <host...>', 'remove hosts from the allowlist')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExamples:\n  agentvm vms egress vm_…\n  agentvm vms egress vm_… --add registry.npmjs.org "*.githubusercontent.com"\n  agentvm vms egress vm_… --mode none')
    .action(apiAction(async (id: string, o: Out & { mode?: string; allow?: string[]; add?: string[]; remove?: string[] }) => {
      const api = await customerClient();
      let vm = await call(api.GET('/v1/api/vms/{id}', { params: { path: { id } } }));
      if (o.mode || o.allow || o.add || o.remove) {
        const drop = new Set(o.remove ?? []);
        const allow = [...(o.allow ?? vm.egress.allow), ...(o.add ?? [])].filter((h) => !drop.has(h));
        const body = { mode: (o.mode ?? vm.egress.mode) as Schemas['Egress']['mode'], allow: [...new Set(allow)] };
        vm = await call(api.PUT('/v1/api/vms/{id}/egress', { params: { path: { id } }, body }));
      }
      print(vm.egress, o, () => record({ vm_id: vm.vm_id, mode: vm.egress.mode, allow: vm.egress.allow.join(' ') || '(nothing)', brokered: vm.brokered_secret_names.join(' ') || '(none)' }));
    }));
}

function vmsShell(cmd: Command): void {
  cmd
    .description('open a terminal in the VM: a login shell as the user agent in /persist/workspace')
    .argument('<vm_id>')
    .addHelpText(
      'after',
      '\nThe terminal follows this window\'s size. Exiting the shell ends it, and so does ~. typed at the start of a line\n' +
        '(~~ sends one ~). The command exits with the shell\'s status.\n\nExample:\n  agentvm vms shell vm_…   # then: opencode auth login',
    )
    .action(apiAction(async (id: string) => {
      const ticket = await call((await customerClient()).POST('/v1/api/vms/{id}/shell', { params: { path: { id } } }));
      const size = process.stdout.isTTY && process.stdout.columns && process.stdout.rows ? `&cols=${process.stdout.columns}&rows=${process.stdout.rows}` : '';
      const { connectShell, runTerminal } = await import('./terminal.ts');
      const ws = await connectShell(`${ticket.url}${size}`);
      process.exit(await runTerminal(ws));
    }));
}

function vmsCp(cmd: Command): void {
  cmd
    .description("copy files between here and a VM's persist disk (a directory with everything in it)")
    .argument('<source>', 'a local path, or vm_…:PATH')
    .argument('<destination>', 'vm_…:PATH, or a local path')
    .addOption(jsonOpt())
    .addHelpText(
      'after',
      '\nOne side is the VM\'s: vm_…:PATH, relative to /persist/workspace unless absolute (under /persist). A destination\n' +
        'ending in / on the VM, or a local directory, takes the source by its name. Files up to 100 MiB each; large ones\n' +
        'show a progress bar when stderr is a terminal.\n\nExamples:\n  agentvm vms cp ./my-repo vm_…:my-repo\n  agentvm vms cp vm_…:my-repo/report.md .',
    )
    .action(apiAction(async (source: string, destination: string, o: Out) => {
      const from = parseRemote(source);
      const to = parseRemote(destination);
      if (Boolean(from) === Boolean(to)) throw new ClientError('invalid_request', 'one of source and destination must be vm_…:PATH, the other a local path');
      const done = from ? await download(from, destination) : await upload(source, to!);
      print(done, o, () => process.stderr.write(`copied ${done.files} file${done.files === 1 ? '' : 's'} (${done.bytes} bytes)\n`));
    }));
}

function templatesFork(cmd: Command): void {
  addWaitOptions(
    cmd
      .description('make a VM from a template (charges the card)')
      .argument('<template>')
      .option('--plan <plan>', "plan for the new VM (default: the template's)")
      .option('--image <image>', 'the image its root starts from: an img_ id or a slug (default: base)')
      .option('--idempotency-key <key>', 'retry safely: the first answer is replayed, the charge happens once')
      .addOption(jsonOpt())
      .addHelpText('after', '\nExample:\n  agentvm templates fork python-starter --wait'),
  ).action(apiAction(async (id: string, o: Out & { plan?: string; image?: string; idempotencyKey?: string; wait?: boolean; timeout: string }) => {
    const api = await customerClient();
    const header = o.idempotencyKey ? { 'Idempotency-Key': o.idempotencyKey } : {};
    const body = { ...(o.plan ? { plan: o.plan as never } : {}), ...(o.image ? { image: o.image } : {}) };
    const forked = await call(api.POST('/v1/api/templates/{id}/fork', { params: { path: { id }, header } as never, body }));
    const final = o.wait ? await waitForVm(api, forked.vm_id, 'running', Number(o.timeout)) : forked;
    print(final, o, () => record(final));
  }));
}

async function prompt(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

function login(cmd: Command): void {
  cmd
    .description('log in with a one-time code sent to your account email; saves a new readwrite key')
    .option('--email <email>', 'account email (asked for when missing)')
    .option('--code <code>', 'the code (asked for when missing)')
    .addOption(jsonOpt())
    .addHelpText('after', `\nThe key is saved in ${configPath()} (mode 0600).\nExample:\n  agentvm login --email you@example.com`)
    .action(apiAction(async (o: Out & { email?: string; code?: string }) => {
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
}

function logout(cmd: Command): void {
  cmd
    .description('revoke the saved key and forget it')
    .addHelpText('after', '\nExample:\n  agentvm logout')
    .action(apiAction(async () => {
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

/** Answers a person reads better reshaped than their descriptor's columns show them, by operationId. */
const VIEWS: Record<string, AnswerView> = {
  listHarnesses: { rows: (list: Schemas['HarnessList']) => list.data.map((h) => ({ ...h, auth: h.auth.mode, default: h.default ? 'yes' : '' })) },
  getHarness: {
    record: (h: Schemas['Harness']) => ({
      ...h,
      auth: `${h.auth.mode}${h.auth.env.length ? ` (${h.auth.env.join(', ')})` : ''}${h.auth.login_command ? ` (${h.auth.login_command})` : ''}`,
    }),
  },
  listVMRuns: { rows: (page: Schemas['RunList']) => page.data.map((r) => ({ ...r, task: oneLine(r.task, 40) })) },
  getVMRun: { record: renderRun },
  getUsage: {
    record: (u: Schemas['Usage']) => ({
      ...u.vms,
      mrr_cents: u.mrr.amount_cents,
      credits_cents: u.credits.balance_cents,
      spent_month_cents: u.credits.spent_month_cents,
    }),
  },
  getLimits: { rows: (v: Schemas['LimitsView']) => Object.entries(v.limits).map(([limit, value]) => ({ limit, value, used: v.usage[limit as keyof typeof v.usage] })) },
};

/** The commands written by hand; every other one is made from its operation's descriptor. */
const HAND_WRITTEN: HandWrittenEntry[] = [
  { command: 'vms create', operationIds: ['createVM'], build: vmsCreate },
  { command: 'vms run', operationIds: ['runVMTask'], build: vmsRun },
  { command: 'vms secrets', operationIds: ['setVMSecrets'], build: vmsSecrets },
  { command: 'vms update', operationIds: ['updateVM'], build: vmsUpdate },
  { command: 'runs logs', operationIds: ['streamVMRun', 'getVMRun'], build: runsLogs },
  { command: 'vms egress', operationIds: ['getVM', 'setVMEgress'], build: vmsEgress },
  { command: 'vms shell', operationIds: ['openVMShell'], build: vmsShell },
  { command: 'vms cp', operationIds: ['readVMFile', 'writeVMFile'], build: vmsCp },
  { command: 'vms url', operationIds: ['listVMPorts', 'rotatePreviewToken'], build: vmsUrl },
  { command: 'vms open', operationIds: ['listVMPorts', 'rotatePreviewToken'], build: vmsOpen },
  { command: 'vms forward', operationIds: ['getVM'], build: vmsForward },
  { command: 'templates fork', operationIds: ['forkTemplate'], build: templatesFork },
  { command: 'events', operationIds: ['listEvents'], build: events },
  { command: 'images build', operationIds: ['createImage', 'streamImageBuild'], build: imagesBuild },
  { command: 'images get', operationIds: ['getImage', 'getBaseImage'], build: imagesGet },
  { command: 'login', operationIds: ['loginStart', 'loginComplete'], build: login },
  { command: 'logout', operationIds: ['revokeKey'], build: logout },
];

/** The customer commands, made from the operations' specs (`specOf` in ./operationSpec.ts) and the hand-written ones. */
export function customerCommands(program: Command, operations: OperationSpec[]): void {
  addCommands(program, operations, HAND_WRITTEN, VIEWS, GROUPS);
}
