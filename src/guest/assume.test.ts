import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bundleAgent } from '../image/build.ts';

const program = fileURLToPath(new URL('./assume.pl', import.meta.url));

describe('the assume program', () => {
  test('is valid Perl', { skip: existsSync('/usr/bin/perl') ? false : 'no perl here' }, async () => {
    const { stderr } = await promisify(execFile)('/usr/bin/perl', ['-c', program]);
    assert.match(stderr, /syntax OK/);
  });

  test('the guest agent bundle carries it verbatim', async () => {
    const bundle = await bundleAgent();
    const text = await readFile(program, 'utf8');
    // esbuild's text loader: `// src/guest/assume.pl` then `var <name> = <string literal>;`
    const m = /\/\/ src\/guest\/assume\.pl\nvar \w+ = (`(?:\\[^]|[^`\\])*`|"(?:\\[^]|[^"\\])*");\n/.exec(bundle);
    assert.ok(m, 'assume.pl is not in the bundle as a string');
    assert.equal(new Function(`return ${m[1]};`)(), text);
    assert.ok(!/from ["']\.\/assume\.pl["']/.test(bundle), 'the bundle still imports assume.pl');
  });
});
