/**
 * One row of the benchmark report: a figure, the baseline it is measured against in the same run,
 * their ratio and the target for it. Each benchmark prints its rows; run under `bench/all.ts`
 * (`npm run bench`) it also hands them over through the file named by BENCH_ROWS_FILE.
 */
import { appendFile } from 'node:fs/promises';

export interface Row {
  bench: string;
  measure: string;
  value: string;
  baseline: string;
  /** value / baseline, when they are comparable. */
  ratio: number | null;
  /** The target in words, e.g. "≤ 10%". Empty when the row is context only. */
  target: string;
  met: boolean | null;
}

export function row(bench: string, measure: string, value: string, baseline = '', ratio: number | null = null, target = '', met: boolean | null = null): Row {
  return { bench, measure, value, baseline, ratio, target, met };
}

export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export function table(rows: Row[]): string {
  const lines = ['| benchmark | measure | value | baseline | ratio | target | met |', '|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    const ratio = r.ratio === null ? '' : `${(r.ratio * 100).toFixed(1)}%`;
    const met = r.met === null ? '' : r.met ? 'yes' : '**no**';
    lines.push(`| ${r.bench} | ${r.measure} | ${r.value} | ${r.baseline} | ${ratio} | ${r.target} | ${met} |`);
  }
  return lines.join('\n');
}

/** Prints the rows, and hands them to `bench/all.ts` when it runs this benchmark. */
export async function report(title: string, rows: Row[]): Promise<void> {
  console.log(`\n${title}\n${table(rows)}`);
  if (process.env.BENCH_ROWS_FILE) await appendFile(process.env.BENCH_ROWS_FILE, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
}
