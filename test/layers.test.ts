// The layers of src/ (scripts/check-layers.mjs): no import crosses one the wrong way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
// @ts-expect-error: a plain ES module of the scripts, without types
import { check } from '../scripts/check-layers.mjs';

type Result = { crossings: Array<{ file: string; to: string; rule: string }>; gone: string[] };
const run = (override?: Record<string, string>): Result => check(undefined, override);
const withLine = (file: string, line: string) => ({ [file]: `${line}\n${readFileSync(file, 'utf8')}` });

test('no import in src/ crosses a layer', () => {
  const { crossings, gone } = run();
  assert.deepEqual(crossings.map((c) => `${c.file} -> ${c.to}`), []);
  assert.deepEqual(gone, []);
});

test('a crossing fails the check: the store importing the driver, domain formatting with the API, a host importing the API', () => {
  for (const [file, line, to] of [
    ['src/store/runs.ts', "import { STANDBY_SLOTS } from '../vmm/commandLine.ts';", 'src/vmm/commandLine.ts'],
    ['src/domain/events.ts', "import type { Vm } from '../api/schemas.ts';", 'src/api/schemas.ts'],
    ['src/host/internalApp.ts', "export { renderError } from '../api/app.ts';", 'src/api/app.ts'],
    ['src/wire/protocol.ts', "const guest = import('../guest/agent.ts');", 'src/guest/agent.ts'],
  ]) {
    const { crossings } = run(withLine(file, line));
    assert.deepEqual(crossings.map((c) => `${c.file} -> ${c.to}`), [`${file} -> ${to}`], line);
  }
});

test('a known crossing that is gone must leave the list', () => {
  const { gone } = run({ 'src/domain/services.ts': readFileSync('src/domain/services.ts', 'utf8').replace(/^import type \{ DriverProbe \}.*$/m, '') });
  assert.deepEqual(gone, ['src/domain/services.ts -> src/vmm/probe.ts']);
});
