// Prints the slowest test files and the suite's total from the lines of scripts/test-report.mjs.
// Usage: node scripts/test-report-summary.mjs <wall seconds> <times.jsonl>...
import { readFileSync } from 'node:fs';

const [wall, ...files] = process.argv.slice(2);
const rows = files.flatMap((f) => {
  try {
    return readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
});
rows.sort((a, b) => b.ms - a.ms);
const s = (ms) => `${(ms / 1000).toFixed(1)} s`.padStart(9);
const sum = rows.reduce((t, r) => t + r.ms, 0);
console.log(`\nThe ten slowest test files (of ${rows.length}; ${s(sum).trim()} of files in all):`);
for (const r of rows.slice(0, 10)) {
  console.log(`${s(r.ms)}  ${r.file}  (${r.pass} passed${r.fail ? `, ${r.fail} failed` : ''}${r.skip ? `, ${r.skip} skipped` : ''})`);
}
const m = Math.floor(Number(wall) / 60);
console.log(`Total wall time: ${m} min ${Number(wall) % 60} s (${wall} s)`);
