import type { Child } from 'hono/jsx';

/**
 * A column of a responsive table: its heading, which a narrow screen shows beside each cell instead
 * (`data-label`, console.css), and how a row fills its cell.
 */
export interface Column<T> {
  label: string;
  /** The heading is for screen readers only (a column of buttons). */
  hiddenLabel?: boolean;
  class?: string;
  cell: (row: T) => Child;
}

/** A table's rows, one cell a column; `empty` fills a row of its own when there are none, `lead` comes first. */
export function TableRows<T>(props: { columns: Column<T>[]; rows: T[]; empty?: Child; lead?: Child; attrs?: Record<string, string> }) {
  return (
    <tbody {...props.attrs}>
      {props.lead}
      {props.rows.length === 0 && props.empty !== undefined ? (
        <tr>
          <td colspan={props.columns.length} class="empty">
            {props.empty}
          </td>
        </tr>
      ) : (
        props.rows.map((row) => (
          <tr>
            {props.columns.map((c) => (
              <td data-label={c.label} class={c.class}>
                {c.cell(row)}
              </td>
            ))}
          </tr>
        ))
      )}
    </tbody>
  );
}

/**
 * The console's table: a caption for screen readers, a heading a column, and rows that a narrow screen
 * stacks as labelled cards. `body` stands in for the rows when they are drawn on their own (a polled tbody).
 */
export function Table<T>(props: { id?: string; caption: Child; columns: Column<T>[]; rows?: T[]; body?: Child; empty?: Child; lead?: Child }) {
  return (
    <div class="table-wrap">
      <table class="table responsive" id={props.id}>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col">{c.hiddenLabel ? <span class="visually-hidden">{c.label}</span> : c.label}</th>
            ))}
          </tr>
        </thead>
        {props.body ?? <TableRows columns={props.columns} rows={props.rows ?? []} empty={props.empty} lead={props.lead} />}
      </table>
    </div>
  );
}

/** A page's offset from the query: a whole number, 0 when missing or wrong, never past a billion. */
export const offsetOf = (raw: string | undefined) => Math.min(1_000_000_000, Math.max(0, Number.parseInt(raw ?? '0', 10) || 0));
