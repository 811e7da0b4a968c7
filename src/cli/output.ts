/**
 * How a customer command shows an answer: the API's JSON with `--json` (for scripts), else a record
 * for one object or a table with named columns for a list (for people).
 */
import Table from 'cli-table3';

/** Shows an answer to a person; `--json` bypasses it. */
export type Rendering = (answer: never) => void;

export interface Out {
  json?: boolean;
}

export function print(value: unknown, o: Out, human?: () => void): void {
  if (o.json || !human) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else human();
}

const show = (v: unknown) =>
  v === null || v === undefined ? '-' : Array.isArray(v) ? v.join(', ') || '-' : typeof v === 'object' ? JSON.stringify(v) : String(v);

export function table(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const t = new Table({ head: columns, style: { head: [], border: [] }, chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' } });
  for (const r of rows) t.push(columns.map((c) => show(r[c])));
  process.stdout.write(`${t.toString()}\n`);
}

export function record(obj: Record<string, unknown>): void {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  process.stdout.write(Object.entries(obj).map(([k, v]) => `${k.padEnd(width)}  ${show(v)}\n`).join(''));
}

/** One object as `key  value` lines; `view` picks or reshapes what a person sees. */
export function asRecord<T>(view?: (answer: T) => Record<string, unknown>): Rendering {
  return ((answer: T) => record(view ? view(answer) : (answer as Record<string, unknown>))) as Rendering;
}

/** A list (`data`, or what `rows` makes of the answer) as a table of `columns`, and an optional last line. */
export function asTable<T>(
  columns: string[],
  how: { rows?: (answer: T) => Record<string, unknown>[]; footer?: (answer: T) => string } = {},
): Rendering {
  return ((answer: T) => {
    table(how.rows ? how.rows(answer) : (answer as { data: Record<string, unknown>[] }).data, columns);
    if (how.footer) process.stdout.write(`${how.footer(answer)}\n`);
  }) as Rendering;
}
