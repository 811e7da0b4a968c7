/**
 * What a command needs of an operation, read from its descriptor: the path parameters, the query
 * parameters and body fields as options (help from the zod descriptions), the columns of the default
 * table, and the descriptor's command hints (its words, --wait, presets, examples). Plain JSON, so that the command's bundle carries it made ahead (scripts/build.mjs)
 * and a command starts without zod and the API's modules; run from the sources it is made at start.
 */
import { z } from 'zod';
import type { Audience, CliHints, Operation } from '../api/operation.ts';
import { kebab, lowerFirst } from './words.ts';

/** One option of a command: the query parameter, body field or header it fills. */
export interface FieldSpec {
  name: string;
  in: 'query' | 'body' | 'wholeBody' | 'header';
  kind: 'text' | 'number' | 'flag' | 'json';
  list: boolean;
  /** commander's flags: `--minutes <n>`. */
  flags: string;
  help: string;
}

export interface OperationSpec {
  operationId: string;
  method: Operation['method'];
  path: string;
  summary: string;
  description?: string;
  tag: string;
  audience: Audience;
  /** The path parameters, in path order: `{id}` after `/vms/` is `vm_id`. */
  positionals: { param: string; name: string; description: string }[];
  /** Query parameters, then body fields (or the whole body), then the Idempotency-Key of a charge. */
  fields: FieldSpec[];
  hasBody: boolean;
  /** The columns a person sees by default for an answer with a `data` list; none for a record. */
  columns?: string[];
  /** The descriptor's command hints (`cli`). */
  cli?: CliHints;
}

interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
}

type Resolve = (node: JsonSchema | undefined) => JsonSchema;

/** The JSON Schema of a zod schema, and how to see through a node's `$ref` or nullable to what it is. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): { top: JsonSchema; resolve: Resolve } {
  const root = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  const resolve: Resolve = (node) => {
    if (!node) return {};
    if (node.$ref) {
      const target = root.$defs?.[node.$ref.replace('#/$defs/', '')] ?? {};
      return resolve({ ...target, ...node, $ref: undefined, description: node.description ?? target.description });
    }
    const notNull = node.anyOf?.filter((n) => n.type !== 'null');
    if (notNull?.length === 1) return resolve({ ...notNull[0], description: node.description ?? notNull[0].description, default: node.default });
    if (Array.isArray(node.type)) return { ...node, type: node.type.find((t) => t !== 'null') };
    return node;
  };
  return { top: resolve(root), resolve };
}

const pathParams = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);

/** `{id}` after `/vms/` reads as `vm_id`; other parameters keep their names. */
function positionalName(path: string, param: string): string {
  if (param !== 'id') return param;
  const segments = path.split('/');
  const before = segments[segments.indexOf('{id}') - 1] ?? '';
  return before ? `${before.replace(/s$/, '')}_id` : param;
}

function fieldSpec(name: string, where: FieldSpec['in'], prop: JsonSchema, resolve: Resolve, required: boolean): FieldSpec {
  const scalar = (p: JsonSchema): FieldSpec['kind'] | undefined =>
    p.type === 'string' ? 'text' : p.type === 'integer' || p.type === 'number' ? 'number' : p.type === 'boolean' ? 'flag' : undefined;
  const items = prop.type === 'array' ? resolve(prop.items) : undefined;
  const itemKind = items && scalar(items) !== 'flag' ? scalar(items) : undefined;
  const kind = itemKind ?? scalar(prop) ?? 'json';
  const list = itemKind !== undefined;
  const flag = `--${kebab(name)}`;
  const placeholder = kind === 'flag' ? '' : kind === 'json' ? ' <json>' : kind === 'number' && !list ? ' <n>' : ` <${name}${list ? '...' : ''}>`;
  const choices = prop.enum ?? items?.enum;
  const notes = [
    choices ? `one of: ${choices.join(', ')}` : '',
    kind === 'json' ? 'JSON' : '',
    prop.default !== undefined ? `default: ${typeof prop.default === 'string' ? prop.default : JSON.stringify(prop.default)}` : '',
    required ? 'required' : '',
  ].filter(Boolean);
  const help = [lowerFirst(prop.description ?? ''), notes.length ? `(${notes.join('; ')})` : ''].filter(Boolean).join(' ');
  return { name, in: where, kind, list, flags: `${flag}${placeholder}`, help };
}

/** The descriptor's columns, else a record, or the scalar columns of a `data` list. */
function defaultColumns(op: Operation): string[] | undefined {
  if (op.cli?.columns) return op.cli.columns;
  const { top, resolve } = jsonSchema(op.success.schema, 'output');
  const data = resolve(top.properties?.data);
  if (data.type !== 'array') return undefined;
  const scalar = ['string', 'integer', 'number', 'boolean'];
  const columns = Object.entries(resolve(data.items).properties ?? {}).filter(([, p]) => scalar.includes(resolve(p).type as string));
  return columns.slice(0, 8).map(([name]) => name);
}

/** An operation's command, as JSON. */
export function specOf(op: Operation): OperationSpec {
  const params = op.params ? jsonSchema(op.params, 'input').top.properties ?? {} : {};
  const positionals = pathParams(op.path).map((param) => ({
    param,
    name: positionalName(op.path, param),
    description: lowerFirst(params[param]?.description ?? ''),
  }));
  const fields: FieldSpec[] = [];
  if (op.query) {
    const { top, resolve } = jsonSchema(op.query, 'input');
    for (const [name, prop] of Object.entries(top.properties ?? {})) fields.push(fieldSpec(name, 'query', resolve(prop), resolve, false));
  }
  if (op.body) {
    const { top: body, resolve } = jsonSchema(op.body.schema, 'input');
    if (body.type === 'object' && body.properties) {
      for (const [name, prop] of Object.entries(body.properties)) fields.push(fieldSpec(name, 'body', resolve(prop), resolve, body.required?.includes(name) ?? false));
    } else {
      const help = `the request body${body.description ? `: ${lowerFirst(body.description)}` : ''} (JSON)`;
      fields.push({ name: 'body', in: 'wholeBody', kind: 'json', list: false, flags: '--body <json>', help });
    }
  }
  if (op.money) {
    const help = 'retry safely: the first answer is replayed, the charge happens once';
    fields.push({ name: 'Idempotency-Key', in: 'header', kind: 'text', list: false, flags: '--idempotency-key <key>', help });
  }
  const { operationId, method, path, summary, description, tag, audience } = op;
  return { operationId, method, path, summary, description, tag, audience, positionals, fields, hasBody: op.body !== undefined, columns: defaultColumns(op), cli: op.cli };
}
