// A reporter for node's test runner: each test file's wall time, one JSON line a file
// ({"file", "ms", "pass", "fail", "skip"}), for scripts/test-report-summary.mjs to rank.
// Used beside the spec reporter: `--test-reporter=./scripts/test-report.mjs --test-reporter-destination=<file>`.
import path from 'node:path';

export default async function* fileTimes(source) {
  const counts = new Map();
  for await (const event of source) {
    const { type, data } = event;
    if (type !== 'test:pass' && type !== 'test:fail' && type !== 'test:complete') continue;
    if (!data.file) continue;
    const file = path.relative(process.cwd(), data.file);
    // The file's own test: named as the file, at the top (its duration is its process's whole life).
    if (data.name === data.file && data.nesting === 0) {
      if (type !== 'test:complete') continue;
      const c = counts.get(file) ?? { pass: 0, fail: 0, skip: 0 };
      counts.delete(file);
      // A file that failed with no failed test (it did not load, or its process died) counts as one failure.
      if (!data.details.passed && c.fail === 0) c.fail = 1;
      yield `${JSON.stringify({ file, ms: Math.round(data.details.duration_ms), ...c })}\n`;
      continue;
    }
    if (type === 'test:complete' || data.details?.type === 'suite') continue;
    const c = counts.get(file) ?? { pass: 0, fail: 0, skip: 0 };
    if (data.skip) c.skip++;
    else if (type === 'test:pass') c.pass++;
    else c.fail++;
    counts.set(file, c);
  }
}
