/**
 * Customer commands made from the operations' own descriptors: path parameters become positional
 * arguments, query parameters and the fields of an object body become `--options` (help from the zod
 * descriptions), the summary becomes the description. A command table says where each one goes and how
 * a person sees its answer; an operation the table does not name still gets a command under its tag.
 */
import { Command, Option } from 'commander';
import type { FieldSpec, OperationSpec } from './operationSpec.ts';
import { call, ClientError, type ApiClient } from '../client/client.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { asRecord, asTable, print, type Rendering } from './output.ts';
import { addWaitOptions, waitForVm, type WaitTarget } from './waitForVm.ts';
import { kebab, lowerFirst } from './words.ts';

/** A command that is one operation. */
export interface OperationEntry {
  /** Its words: `vms get`. */
  command: string;
  operationId: string;
  /** How a person sees the answer; by default a record, or a table for a `data` list. */
  render?: Rendering;
  /** Adds `--wait`: polls the VM in the answer until it has this status. */
  waitFor?: WaitTarget;
  /** Flags that stand for body fields, kept from before the fields had options of their own. */
  presets?: PresetFlag[];
  examples?: string[];
}

/** A command a person's habit shaped (prompts, --wait on a create, streams): written by hand. */
export interface HandWrittenEntry {
  command: string;
  /** The operations it calls, so that a test can see every operation reachable. */
  operationIds: string[];
  build: (cmd: Command) => void;
}

export type CommandEntry = OperationEntry | HandWrittenEntry;

export interface PresetFlag {
  flag: string;
  description: string;
  sets: Record<string, unknown>;
}

export interface CommandField {
  /** The query parameter, body field or header it fills; for a preset, the body fields it sets. */
  name: string;
  in: 'query' | 'body' | 'wholeBody' | 'header';
  kind: 'text' | 'number' | 'flag' | 'json' | 'preset';
  list: boolean;
  option: Option;
  sets?: Record<string, unknown>;
}

/** What a command made from an operation takes: positionals in path order, then options. */
export interface CommandShape {
  positionals: { param: string; name: string; description: string }[];
  fields: CommandField[];
  hasBody: boolean;
}

/** The positionals and options of an operation's command, with the flags that stand for body fields. */
export function commandShape(spec: OperationSpec, presets: PresetFlag[] = []): CommandShape {
  const field = (f: FieldSpec): CommandField => ({ name: f.name, in: f.in, kind: f.kind, list: f.list, option: new Option(f.flags, f.help) });
  const fields = [
    ...spec.fields.filter((f) => f.in !== 'header').map(field),
    ...presets.map((p): CommandField => ({ name: Object.keys(p.sets).join(','), in: 'body', kind: 'preset', list: false, option: new Option(p.flag, p.description), sets: p.sets })),
    ...spec.fields.filter((f) => f.in === 'header').map(field),
  ];
  return { positionals: spec.positionals, fields, hasBody: spec.hasBody };
}

function convert(field: CommandField, value: unknown): unknown {
  if (field.kind === 'number') {
    const n = Number(value);
    // Not a number: sent as typed, so that the API names the field in its answer.
    return typeof value === 'string' && value.trim() !== '' && Number.isFinite(n) ? n : value;
  }
  if (field.kind === 'json') {
    try {
      return JSON.parse(String(value));
    } catch {
      throw new ClientError('invalid_request', `${field.option.long}: not valid JSON`);
    }
  }
  return value;
}

/** The request of one call: positionals into the path, options into the query, body or headers. */
export function requestFor(shape: CommandShape, positionals: string[], opts: Record<string, unknown>) {
  const path = Object.fromEntries(shape.positionals.map((p, i) => [p.param, positionals[i]]));
  const query: Record<string, unknown> = {};
  const header: Record<string, string> = {};
  let body: unknown = shape.hasBody ? {} : undefined;
  // Presets first, so that a field's own option says the last word.
  const ordered = [...shape.fields.filter((f) => f.kind === 'preset'), ...shape.fields.filter((f) => f.kind !== 'preset')];
  for (const field of ordered) {
    const raw = opts[field.option.attributeName()];
    if (raw === undefined || raw === false) continue;
    if (field.kind === 'preset') {
      Object.assign(body as object, field.sets);
      continue;
    }
    const value = Array.isArray(raw) ? raw.map((v) => convert(field, v)) : convert(field, raw);
    if (field.in === 'query') query[field.name] = value;
    else if (field.in === 'header') header[field.name] = String(value);
    else if (field.in === 'wholeBody') body = value;
    else (body as Record<string, unknown>)[field.name] = value;
  }
  return { params: { path, query, header }, body };
}

/** Without a table entry: a record, or a table of the scalar columns of a `data` list. */
const defaultRendering = (spec: OperationSpec): Rendering => (spec.columns ? asTable(spec.columns) : asRecord());

type Send = (path: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
const send = (api: ApiClient, op: OperationSpec, init: unknown) => (api[op.method.toUpperCase() as 'GET'] as Send)(op.path, init);

const BINDINGS = new WeakMap<Command, { operationIds: string[]; shape?: CommandShape }>();

/** The operations a command calls, and its shape when it was made from one. */
export const commandBinding = (cmd: Command) => BINDINGS.get(cmd);

/** Fills `cmd` in from `op`: arguments, options, description, example, and the call. */
function buildFromOperation(cmd: Command, op: OperationSpec, entry: OperationEntry): void {
  const shape = commandShape(op, entry.presets);
  const summary = lowerFirst(op.summary.replace(/\s*\(extension[^)]*\)/, ''));
  cmd.summary(summary).description(`${summary}${op.description ? `\n\n${op.description}` : ''}`);
  for (const p of shape.positionals) cmd.argument(`<${p.name}>`, p.description);
  for (const f of shape.fields) cmd.addOption(f.option);
  if (entry.waitFor) addWaitOptions(cmd);
  cmd.option('--json', 'print JSON (for scripts)');
  const placeholders = shape.positionals.map((p) => (p.name.endsWith('_id') ? `${p.name.slice(0, -3)}_…` : `<${p.name}>`));
  const examples = entry.examples ?? [['agentvm', entry.command, ...placeholders, ...(entry.waitFor ? ['--wait'] : [])].join(' ')];
  cmd.addHelpText('after', `\nExample${examples.length > 1 ? 's' : ''}:\n${examples.map((e) => `  ${e}\n`).join('')}`);
  const render = entry.render ?? defaultRendering(op);
  cmd.action(
    apiAction(async (...args: unknown[]) => {
      const o = cmd.opts();
      const api = await customerClient(op.audience === 'public');
      const answer = await call(send(api, op, requestFor(shape, args.slice(0, shape.positionals.length) as string[], o)));
      const shown = entry.waitFor && o.wait ? await waitForVm(api, (answer as { vm_id: string }).vm_id, entry.waitFor, Number(o.timeout)) : answer;
      print(shown, o, () => (render as (a: unknown) => void)(shown));
    }),
  );
  BINDINGS.set(cmd, { operationIds: [op.operationId], shape });
}

/** The command at `words`, making the groups on the way; null when the last word is taken. */
function newCommandAt(program: Command, words: string[], groups: Record<string, string>): Command | null {
  let parent = program;
  for (const [i, word] of words.slice(0, -1).entries()) {
    const path = words.slice(0, i + 1).join(' ');
    parent = parent.commands.find((c) => c.name() === word) ?? parent.command(word).description(groups[path] ?? word);
  }
  const name = words[words.length - 1];
  return parent.commands.some((c) => c.name() === name) ? null : parent.command(name);
}

/**
 * Adds the table's commands in its order, then one for each operation it does not name: under the
 * group of its tag, named from its operationId without the group's noun (`pauseVM` → `vms pause`).
 */
export function addCommands(program: Command, entries: CommandEntry[], operations: OperationSpec[], groups: Record<string, string>): void {
  const byId = new Map(operations.map((op) => [op.operationId, op]));
  const named = new Set<string>();
  for (const entry of entries) {
    const cmd = newCommandAt(program, entry.command.split(' '), groups);
    if (!cmd) throw new Error(`two commands are named "${entry.command}"`);
    if ('build' in entry) {
      entry.build(cmd);
      BINDINGS.set(cmd, { operationIds: entry.operationIds });
      entry.operationIds.forEach((id) => named.add(id));
      continue;
    }
    const op = byId.get(entry.operationId);
    if (!op) throw new Error(`the command "${entry.command}" names no operation "${entry.operationId}"`);
    buildFromOperation(cmd, op, entry);
    named.add(op.operationId);
  }
  for (const op of operations.filter((o) => !named.has(o.operationId) && o.audience !== 'admin')) {
    const group = op.tag.toLowerCase().replace(/\s+/g, '-');
    const full = kebab(op.operationId);
    const short = full.split('-').filter((w) => w !== group && w !== group.replace(/s$/, '')).join('-') || full;
    const cmd = newCommandAt(program, [group, short], groups) ?? newCommandAt(program, [group, full], groups);
    if (!cmd) throw new Error(`no command name left for the operation ${op.operationId}`);
    buildFromOperation(cmd, op, { command: `${group} ${cmd.name()}`, operationId: op.operationId });
  }
}
