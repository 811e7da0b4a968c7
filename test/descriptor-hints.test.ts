/**
 * One source per operation: a descriptor's `mcp` and `cli` hints alone make its MCP tool (name,
 * annotations, arguments) and its CLI command (words, --wait, preset flags, columns, examples).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Command } from 'commander';
import { z } from 'zod';
import { defineOperation } from '../src/api/operation.ts';
import { CUSTOMER_OPERATIONS } from '../src/api/routes.ts';
import { IdParam, Vm } from '../src/api/schemas.ts';
import { customerCommands } from '../src/cli/customer.ts';
import { commandBinding, commandShape, requestFor } from '../src/cli/operationCommands.ts';
import { specOf } from '../src/cli/operationSpec.ts';
import { toolAnnotations, toolName } from '../src/mcp/server.ts';

const holdVM = defineOperation({
  operationId: 'holdVM',
  method: 'post',
  path: '/v1/api/vms/{id}/hold',
  summary: 'Hold a VM where it is (extension)',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_hold', destructive: true, idempotent: true },
  cli: {
    command: 'vms hold',
    waitFor: 'stopped',
    presets: [{ flag: '--briefly', description: 'for ten minutes (--minutes 10)', sets: { minutes: 10 } }],
    examples: ['agentvm vms hold vm_… --briefly --wait'],
  },
  params: IdParam,
  body: { schema: z.strictObject({ minutes: z.int().min(1).optional() }), required: false },
  success: { status: 200, schema: Vm, description: 'The held VM' },
  errors: [],
  handler: async () => ({ body: {} as never }),
});

function helpOf(cmd: Command): string {
  let text = '';
  cmd.configureOutput({ writeOut: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

test("a new operation's command comes from its descriptor: its words, --wait, a preset flag and its example", () => {
  const program = new Command('agentvm').exitOverride();
  customerCommands(program, [...CUSTOMER_OPERATIONS, holdVM].map(specOf));
  const hold = program.commands.find((c) => c.name() === 'vms')!.commands.find((c) => c.name() === 'hold');
  assert.ok(hold, 'no `vms hold`');
  assert.deepEqual(commandBinding(hold)?.operationIds, ['holdVM']);
  assert.deepEqual(hold.options.map((o) => o.long), ['--minutes', '--briefly', '--wait', '--timeout', '--json']);
  assert.match(helpOf(hold), /Example:\n {2}agentvm vms hold vm_… --briefly --wait\n/);
  assert.deepEqual(requestFor(commandShape(specOf(holdVM)), ['vm_1'], { briefly: true }).body, { minutes: 10 });
});

test("a new operation's tool comes from its descriptor: its name and hints", () => {
  assert.equal(toolName(holdVM), 'vm_hold');
  assert.deepEqual(toolAnnotations(holdVM), { title: holdVM.summary, readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false });
  const stop = CUSTOMER_OPERATIONS.find((o) => o.operationId === 'stopVM')!;
  assert.deepEqual([toolName(stop), toolAnnotations(stop).destructiveHint, specOf(stop).cli?.waitFor], ['vm_stop', true, 'stopped']);
});

test('every command and tool name is given once, and each lifecycle command waits for the status its action leads to', () => {
  const commands = CUSTOMER_OPERATIONS.flatMap((o) => (o.cli?.command ? [o.cli.command] : []));
  assert.equal(new Set(commands).size, commands.length);
  const tools = CUSTOMER_OPERATIONS.map(toolName);
  assert.equal(new Set(tools).size, tools.length);
  const waits = Object.fromEntries(CUSTOMER_OPERATIONS.filter((o) => o.cli?.waitFor).map((o) => [o.cli!.command, o.cli!.waitFor]));
  assert.deepEqual(waits, { 'vms stop': 'stopped', 'vms start': 'running', 'vms restart': 'running', 'vms reprovision': 'running', 'vms suspend': 'suspended' });
});
