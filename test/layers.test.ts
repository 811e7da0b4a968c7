// The layers of src/ (scripts/check-layers.mjs): no import crosses one the wrong way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
// @ts-expect-error: a plain ES module of the scripts, without types
import { crossings } from '../scripts/check-layers.mjs';

type Crossing = { file: string; to: string; rule: string };
const found = (override?: Record<string, string>): string[] => (crossings(undefined, override) as Crossing[]).map((c) => `${c.file} -> ${c.to}`);
const withLine = (file: string, line: string) => ({ [file]: `${line}\n${readFileSync(file, 'utf8')}` });

test('no import in src/ crosses a layer', () => {
  assert.deepEqual(found(), []);
});

test('a crossing fails the check: the circles of before, the store reaching up, the guest or the wire reaching out', () => {
  for (const [file, line, to] of [
    ['src/domain/events.ts', "import { presentVm } from '../api/present.ts';", 'src/api/present.ts'],
    ['src/api/operations/runs.ts', "import { requestHeader } from '../app.ts';", 'src/api/app.ts'],
    ['src/host/internalApp.ts', "export { renderError } from '../api/app.ts';", 'src/api/app.ts'],
    ['src/store/vms.ts', "import type { VmStatus } from '../domain/vmState.ts';", 'src/domain/vmState.ts'],
    ['src/store/runs.ts', "import { STANDBY_SLOTS } from '../vmm/commandLine.ts';", 'src/vmm/commandLine.ts'],
    ['src/domain/webhooks.ts', "import { DenyList } from '../host/egress/gateway.ts';", 'src/host/egress/gateway.ts'],
    ['src/guest/agent.ts', "import { iso } from '../domain/present.ts';", 'src/domain/present.ts'],
    ['src/wire/protocol.ts', "const agent = import('../guest/agent.ts');", 'src/guest/agent.ts'],
  ]) {
    assert.deepEqual(found(withLine(file, line)), [`${file} -> ${to}`], line);
  }
});
