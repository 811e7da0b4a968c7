// A reporter for node's test runner: each test file's wall time, one JSON line a file
// ({"file", "ms", "pass", "fail", "skip"}; ms less any wait for the VM slot), for
// scripts/test-report-summary.mjs to rank.
// Used beside the spec reporter: `--test-reporter=./scripts/test-report.mjs --test-reporter-destination=<file>`.
// The lines come at the end of the run: with two files at a time, the runner hands on a file's
// tests only once the files before it are done, after its own end.
import path from 'node:path';

export default async function* fileTimes(source) {
  const files = new Map();
  const of = (file) => {
    if (!files.has(file)) files.set(file, { ms: 0, waited: 0, pass: 0, fail: 0, skip: 0, ended: false, passed: true });
    return files.get(file);
  };
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    if (type === 'test:stderr') {
      // The time a file waited for the VM slot (scripts/test-vm-slot.mjs) before its tests began.
      const m = /agentvm-test-vm-slot: waited (\d+) ms/.exec(data.message);
      if (m) of(data.file).waited = Number(m[1]);
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail' && type !== 'test:complete') continue;
    const f = of(data.file);
    // The file's own test: named as the file, at the top (its duration is its process's whole life).
    if (data.name === data.file && data.nesting === 0) {
      if (type === 'test:complete') Object.assign(f, { ms: data.details.duration_ms, ended: true, passed: data.details.passed });
      continue;
    }
    if (type === 'test:complete' || data.details?.type === 'suite') continue;
    if (data.skip) f.skip++;
    else if (type === 'test:pass') f.pass++;
    else f.fail++;
  }
  for (const [file, f] of files) {
    if (!f.ended) continue;
    // A file that failed with no failed test (it did not load, or its process died) counts as one failure.
    const fail = !f.passed && f.fail === 0 ? 1 : f.fail;
    yield `${JSON.stringify({ file: path.relative(process.cwd(), file), ms: Math.round(f.ms - f.waited), pass: f.pass, fail, skip: f.skip })}\n`;
  }
}
