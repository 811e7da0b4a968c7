/**
 * The customer CLI made from the operation descriptors: every operation has a command, each command made
 * from an operation takes its path parameters as positionals and its query and body fields as options,
 * the commands people already type still parse, and an operation nobody wrote a command for gets one.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { CUSTOMER_OPERATIONS } from '../src/api/routes.ts';
import type { Operation } from '../src/api/operation.ts';
import { ClientError } from '../src/client/client.ts';
import { customerCommands } from '../src/cli/customer.ts';
import { commandBinding, commandShape, requestFor } from '../src/cli/operationCommands.ts';
import { specOf } from '../src/cli/operationSpec.ts';
import { listBackups, pauseVM, WITH_NEW_OPERATIONS } from './fixtures/cli-with-new-operations.ts';
import { toolName, toolOperations } from '../src/mcp/server.ts';

const FIXTURE = path.resolve(path.dirname(new URL(import.meta.url).pathname), 'fixtures/cli-with-new-operations.ts');

/** Every command under `cmd`, with its words. */
function walk(cmd: Command, words: string[] = []): { words: string[]; cmd: Command }[] {
  return cmd.commands.flatMap((sub) => [{ words: [...words, sub.name()], cmd: sub }, ...walk(sub, [...words, sub.name()])]);
}

function programWith(operations: Operation[] = CUSTOMER_OPERATIONS): Command {
  const program = new Command('agentvm').exitOverride();
  customerCommands(program, operations.map(specOf));
  return program;
}

const find = (program: Command, words: string) => walk(program).find((c) => c.words.join(' ') === words)?.cmd;
const pathParams = (p: string) => [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
const flag = (name: string) => `--${name.replace(/_/g, '-')}`;
const keysOf = (schema: unknown) => Object.keys((schema as { shape?: object } | undefined)?.shape ?? {});

describe('the customer CLI from the operation descriptors', () => {
  test('every customer operation is reachable from a command', () => {
    const reachable = new Set(walk(programWith()).flatMap(({ cmd }) => commandBinding(cmd)?.operationIds ?? []));
    for (const op of CUSTOMER_OPERATIONS) assert.ok(reachable.has(op.operationId), `${op.operationId} has no command`);
  });

  test('a command made from an operation takes each path parameter as a positional and each query and body field as an option', () => {
    const made = walk(programWith()).filter(({ cmd }) => commandBinding(cmd)?.shape);
    assert.ok(made.length >= 18, `only ${made.length} commands are made from operations`);
    for (const { words, cmd } of made) {
      const op = CUSTOMER_OPERATIONS.find((o) => o.operationId === commandBinding(cmd)!.operationIds[0])!;
      const args = cmd.registeredArguments.map((a) => a.name());
      const params = pathParams(op.path);
      assert.equal(args.length, params.length, words.join(' '));
      params.forEach((p, i) => assert.ok(args[i].endsWith(p), `${words.join(' ')}: positional ${i} is ${args[i]}, the path has {${p}}`));
      assert.ok(cmd.registeredArguments.every((a) => a.required), words.join(' '));
      const options = cmd.options.map((o) => o.long);
      for (const q of keysOf(op.query)) assert.ok(options.includes(flag(q)), `${words.join(' ')}: no ${flag(q)}`);
      for (const b of keysOf(op.body?.schema)) assert.ok(options.includes(flag(b)), `${words.join(' ')}: no ${flag(b)}`);
      assert.ok(options.includes('--json'), `${words.join(' ')}: no --json`);
      assert.match(helpOf(cmd), /Example:\n  agentvm /, words.join(' '));
    }
  });

  test('the commands and flags of before are all there', () => {
    const program = programWith();
    const before: Record<string, string[]> = {
      whoami: ['--json'],
      'harnesses list': ['--json'],
      'harnesses get': ['--json'],
      'vms list': ['--json'],
      'vms get': ['--json'],
      'vms create': ['--plan', '--cycle', '--tier', '--harness', '--count', '--egress', '--allow', '--idempotency-key', '--wait', '--timeout', '--json'],
      'vms stop': ['--wait', '--timeout', '--json'],
      'vms start': ['--wait', '--timeout', '--json'],
      'vms restart': ['--wait', '--timeout', '--json'],
      'vms reprovision': ['--wait', '--timeout', '--json'],
      'vms destroy': ['--json'],
      'vms run': ['--model', '--provider', '--json'],
      'vms secrets': ['--set', '--unset', '--json'],
      'vms egress': ['--mode', '--allow', '--add', '--remove', '--json'],
      'vms egress-log': ['--limit', '--json'],
      'templates list': ['--q', '--harness', '--tag', '--sort', '--limit', '--offset', '--json'],
      'templates get': ['--json'],
      'templates fork': ['--plan', '--wait', '--timeout', '--json'],
      'templates capture': ['--public', '--name', '--json'],
      billing: ['--json'],
      usage: ['--json'],
      'keys list': ['--json'],
      'keys issue': ['--label', '--scope', '--json'],
      'keys revoke': ['--json'],
      login: ['--email', '--code', '--json'],
      logout: [],
    };
    for (const [words, flags] of Object.entries(before)) {
      const cmd = find(program, words);
      assert.ok(cmd, `no command ${words}`);
      const options = cmd.options.map((o) => o.long);
      for (const f of flags) assert.ok(options.includes(f), `${words}: no ${f}`);
      assert.match(helpOf(cmd), /Example/, words);
    }
  });

  test('an operation whose descriptor names no command gets one under its tag, named from its operationId', () => {
    const program = programWith(WITH_NEW_OPERATIONS);
    const pause = find(program, 'vms pause');
    assert.ok(pause, 'no `vms pause`');
    assert.deepEqual(commandBinding(pause)?.operationIds, ['pauseVM']);
    assert.deepEqual(pause.registeredArguments.map((a) => a.name()), ['vm_id']);
    assert.deepEqual(pause.options.map((o) => o.flags), ['--until <until>', '--minutes <n>', '--keep-ip', '--labels <labels...>', '--egress <json>', '--idempotency-key <key>', '--json']);
    assert.equal(pause.summary(), 'pause a VM for a while');
    assert.match(pause.options.find((o) => o.long === '--minutes')!.description, /how long \(required\)/);
    assert.ok(find(program, 'backups list'), 'no `backups list` for a new tag');
  });

  test('options become the query, the body and the headers of the call', () => {
    const shape = commandShape(specOf(pauseVM));
    const req = requestFor(shape, ['vm_1'], { until: '2030-01-01T00:00:00Z', minutes: '15', keepIp: true, labels: ['a', 'b'], egress: '{"mode":"none"}', idempotencyKey: 'k1' });
    assert.deepEqual(req, {
      params: { path: { id: 'vm_1' }, query: { until: '2030-01-01T00:00:00Z' }, header: { 'Idempotency-Key': 'k1' } },
      body: { minutes: 15, keep_ip: true, labels: ['a', 'b'], egress: { mode: 'none' } },
    });
    // Not a number: sent as typed, for the API to name the field.
    assert.equal((requestFor(shape, ['vm_1'], { minutes: 'soon' }).body as { minutes: unknown }).minutes, 'soon');
    assert.throws(() => requestFor(shape, ['vm_1'], { egress: '{mode' }), (err: unknown) => err instanceof ClientError && err.code === 'invalid_request' && /--egress/.test(err.message));

    const capture = CUSTOMER_OPERATIONS.find((o) => o.operationId === 'captureTemplate')!;
    const withPreset = commandShape(specOf(capture), [{ flag: '--public', description: '', sets: { visibility: 'public' } }]);
    assert.deepEqual(requestFor(withPreset, ['vm_1'], { public: true, name: 'x' }).body, { visibility: 'public', name: 'x' });
    assert.deepEqual(requestFor(withPreset, ['vm_1'], {}).body, {});

    const secrets = CUSTOMER_OPERATIONS.find((o) => o.operationId === 'setVMSecrets')!;
    const whole = commandShape(specOf(secrets));
    assert.deepEqual(whole.fields.map((f) => f.option.long), ['--body']);
    assert.deepEqual(requestFor(whole, ['vm_1'], { body: '{"A":"1","B":null}' }).body, { A: '1', B: null });
  });

  describe('a command made from an operation, against a loopback server', () => {
    let server: Server;
    let url: string;
    let configHome: string;
    const seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];
    let answer: unknown = {};

    before(async () => {
      configHome = await mkdtemp(path.join(os.tmpdir(), 'agentvm-cfg-'));
      server = createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await rm(configHome, { recursive: true, force: true });
    });

    /** `agentvm …` with the two new operations, as a process of its own; what it printed. */
    async function run(args: string[]): Promise<string> {
      const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...args], {
        env: { ...process.env, AGENTVM_BASE_URL: url, AGENTVM_API_KEY: 'avm_live_test', XDG_CONFIG_HOME: configHome },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c) => (out += c));
      child.stderr.on('data', (c) => (err += c));
      const code = await new Promise((r) => child.on('close', r));
      assert.equal(code, 0, err);
      return out;
    }

    test('positionals, options and the key go where the operation says', async () => {
      answer = { vm_id: 'vm_1', status: 'running' };
      const printed = await run(['vms', 'pause', 'vm_1', '--until', 'noon', '--minutes', '5', '--keep-ip', '--idempotency-key', 'k9', '--json']);
      const req = seen.at(-1)!;
      assert.equal(req.method, 'POST');
      assert.equal(req.url, '/v1/api/vms/vm_1/pause?until=noon');
      assert.equal(req.headers.authorization, 'Bearer avm_live_test');
      assert.equal(req.headers['idempotency-key'], 'k9');
      assert.deepEqual(JSON.parse(req.body), { minutes: 5, keep_ip: true });
      assert.deepEqual(JSON.parse(printed), answer);
    });

    test('a list prints a table with the named columns, or of the scalar fields without an entry; --json prints the answer as it came', async () => {
      answer = { data: [{ at: '2030-01-01T00:00:00Z', decision: 'denied', host: 'evil.example', port: 443, reason: 'not allowed', bytes_out: 0, bytes_in: 0 }], has_more: false };
      const printed = await run(['vms', 'egress-log', 'vm_2', '--limit', '3']);
      assert.equal(seen.at(-1)!.url, '/v1/api/vms/vm_2/egress/log?limit=3');
      assert.match(printed, /at.*decision.*host.*port.*reason.*bytes_out.*bytes_in/);
      assert.match(printed, /denied.*evil\.example.*443/);
      assert.deepEqual(JSON.parse(await run(['vms', 'egress-log', 'vm_2', '--json'])), answer);
      assert.equal(seen.at(-1)!.url, '/v1/api/vms/vm_2/egress/log');
      answer = { data: [{ backup_id: 'bak_1', size: 7, tags: ['x'] }] };
      const backups = await run(['backups', 'list']);
      assert.equal(seen.at(-1)!.url, '/v1/api/backups');
      assert.match(backups, /backup_id.*size/);
      assert.doesNotMatch(backups, /tags/);
      assert.match(backups, /bak_1.*7/);
    });

    test('templates capture --public sends the visibility; keys issue sends only what was given', async () => {
      answer = { template_id: 'tpl_1', name: 'mine' };
      const printed = await run(['templates', 'capture', 'vm_3', '--public', '--name', 'mine']);
      assert.equal(seen.at(-1)!.url, '/v1/api/vms/vm_3/capture');
      assert.deepEqual(JSON.parse(seen.at(-1)!.body), { visibility: 'public', name: 'mine' });
      assert.match(printed, /^template_id  tpl_1\nname         mine\n$/);
      answer = { key_id: 'key_1' };
      await run(['keys', 'issue', '--label', 'ci']);
      assert.deepEqual(JSON.parse(seen.at(-1)!.body), { label: 'ci' });
    });
  });
});

describe('the MCP tools from the operation descriptors', () => {
  test('every operation a key can call is a tool (an event stream is not), with a distinct name; a new one is named from its operationId', () => {
    const ops = toolOperations();
    const customer = CUSTOMER_OPERATIONS.filter((o) => o.audience === 'customer').map((o) => o.operationId);
    assert.deepEqual(ops.map((o) => o.operationId).sort(), customer.filter((id) => id !== 'streamVMRun' && id !== 'streamImageBuild').sort());
    for (const [id, name] of [['runVMTask', 'vm_run'], ['getVMRun', 'run_get'], ['listVMRuns', 'runs_list'], ['cancelVMRun', 'run_cancel']]) {
      assert.equal(toolName(CUSTOMER_OPERATIONS.find((o) => o.operationId === id)!), name);
    }
    assert.equal(new Set(ops.map(toolName)).size, ops.length);
    assert.equal(toolName(CUSTOMER_OPERATIONS.find((o) => o.operationId === 'createVM')!), 'vm_provision', "the contract's names stay");
    assert.equal(toolName(pauseVM), 'pause_vm');
    assert.equal(toolName(listBackups), 'list_backups');
  });
});

/** The whole `--help` text of a command, with the examples added after it. */
function helpOf(cmd: Command): string {
  let text = '';
  cmd.configureOutput({ writeOut: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}
