/**
 * Customer commands made from the operations' own descriptors: path parameters become positional
 * arguments, query parameters and the fields of an object body become `--options` (help from the zod
 * descriptions), the summary becomes the description, and the descriptor's `cli` hints give its words,
 * `--wait`, preset flags, examples and columns. An operation without hints still gets a command under
 * its tag. Written by hand only where a person's habit asks for more than one call.
 */
import { Command, Option } from 'commander';
import type { CliHints } from '../api/operation.ts';
import type { FieldSpec, OperationSpec } from './operationSpec.ts';
import { call, ClientError, type ApiClient } from '../client/client.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { asRecord, asTable, print, type Rendering } from './output.ts';
import { addWaitOptions, waitForVm } from './waitForVm.ts';
import { kebab, lowerFirst } from './words.ts';

/** A command a person's habit shaped (prompts, --wait on a create, streams): written by hand. */
export interface HandWrittenEntry {
  command: string;
  /** The operations it calls, so that a test can see every operation reachable; it is listed beside the first. */
  operationIds: string[];
  build: (cmd: Command) => void;
}

/**
 * An answer a person reads better reshaped than its descriptor's columns show it: the rows of its
 * table, or the view of its record.
 */
export interface AnswerView {
  rows?: (answer: never) => Record<string, unknown>[];
  record?: (answer: never) => Record<string, unknown>;
}

export type PresetFlag = NonNullable<CliHints['presets']>[number];

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
export function commandShape(spec: OperationSpec, presets: PresetFlag[] = spec.cli?.presets ?? []): CommandShape {
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

/** The last line of a page of a longer list. */
const pageFooter = (page: { total: number; has_more: boolean; next_offset?: number | null }) =>
  `${page.total} in all${page.has_more ? `; next page: --offset ${page.next_offset}` : ''}`;

/** A table of the descriptor's columns (or the scalar ones of a `data` list), else a record; reshaped by `view`. */
function renderingOf(spec: OperationSpec, view: AnswerView = {}): Rendering {
  if (!spec.columns) return asRecord(view.record as ((answer: unknown) => Record<string, unknown>) | undefined);
  return asTable(spec.columns, { rows: view.rows as ((answer: unknown) => Record<string, unknown>[]) | undefined, footer: spec.cli?.paged ? (pageFooter as (answer: unknown) => string) : undefined });
}

type Send = (path: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
const send = (api: ApiClient, op: OperationSpec, init: unknown) => (api[op.method.toUpperCase() as 'GET'] as Send)(op.path, init);

const BINDINGS = new WeakMap<Command, { operationIds: string[]; shape?: CommandShape }>();

/** The operations a command calls, and its shape when it was made from one. */
export const commandBinding = (cmd: Command) => BINDINGS.get(cmd);

/** Fills `cmd` in from `op`: arguments, options, description, example, and the call. */
function buildFromOperation(cmd: Command, op: OperationSpec, words: string, view?: AnswerView): void {
  const shape = commandShape(op);
  const waitFor = op.cli?.waitFor;
  const summary = lowerFirst(op.summary.replace(/\s*\(extension[^)]*\)/, ''));
  cmd.summary(summary).description(`${summary}${op.description ? `\n\n${op.description}` : ''}`);
  for (const p of shape.positionals) cmd.argument(`<${p.name}>`, p.description);
  for (const f of shape.fields) cmd.addOption(f.option);
  if (waitFor) addWaitOptions(cmd);
  cmd.option('--json', 'print JSON (for scripts)');
  const placeholders = shape.positionals.map((p) => (p.name.endsWith('_id') ? `${p.name.slice(0, -3)}_…` : `<${p.name}>`));
  const examples = op.cli?.examples ?? [['agentvm', words, ...placeholders, ...(waitFor ? ['--wait'] : [])].join(' ')];
  cmd.addHelpText('after', `\nExample${examples.length > 1 ? 's' : ''}:\n${examples.map((e) => `  ${e}\n`).join('')}`);
  const render = renderingOf(op, view);
  cmd.action(
    apiAction(async (...args: unknown[]) => {
      const o = cmd.opts();
      const api = await customerClient(op.audience === 'public');
      const answer = await call(send(api, op, requestFor(shape, args.slice(0, shape.positionals.length) as string[], o)));
      const shown = waitFor && o.wait ? await waitForVm(api, (answer as { vm_id: string }).vm_id, waitFor, Number(o.timeout)) : answer;
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
 * Adds a command for each operation, in the operations' order: the words its descriptor gives, else
 * under the group of its tag, named from its operationId without the group's noun (`pauseVM` → `vms
 * pause`); an operation a hand-written command calls and whose descriptor names no command gets none
 * of its own. Each hand-written command is listed beside the first operation it calls.
 */
export function addCommands(
  program: Command,
  operations: OperationSpec[],
  handWritten: HandWrittenEntry[],
  views: Record<string, AnswerView>,
  groups: Record<string, string>,
): void {
  const byHand = new Set(handWritten.flatMap((e) => e.operationIds));
  const add = (words: string) => {
    const cmd = newCommandAt(program, words.split(' '), groups);
    if (!cmd) throw new Error(`two commands are named "${words}"`);
    return cmd;
  };
  const placed = new Set<HandWrittenEntry>();
  const addHandWritten = (entry: HandWrittenEntry) => {
    const cmd = add(entry.command);
    entry.build(cmd);
    BINDINGS.set(cmd, { operationIds: entry.operationIds });
    placed.add(entry);
  };
  for (const op of operations.filter((o) => o.audience !== 'admin')) {
    if (op.cli?.command) buildFromOperation(add(op.cli.command), op, op.cli.command, views[op.operationId]);
    else if (!byHand.has(op.operationId)) {
      const group = op.tag.toLowerCase().replace(/\s+/g, '-');
      const full = kebab(op.operationId);
      const short = full.split('-').filter((w) => w !== group && w !== group.replace(/s$/, '')).join('-') || full;
      const cmd = newCommandAt(program, [group, short], groups) ?? newCommandAt(program, [group, full], groups);
      if (!cmd) throw new Error(`no command name left for the operation ${op.operationId}`);
      buildFromOperation(cmd, op, `${group} ${cmd.name()}`, views[op.operationId]);
    }
    for (const entry of handWritten.filter((e) => e.operationIds[0] === op.operationId && !placed.has(e))) addHandWritten(entry);
  }
  for (const entry of handWritten.filter((e) => !placed.has(e))) addHandWritten(entry);
}
