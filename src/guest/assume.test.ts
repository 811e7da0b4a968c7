import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
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

  test("sees a connection to an address in the kernel's tables, IPv4 or mapped on an IPv6 socket (no `ss` started after a resume without one)", { skip: existsSync('/usr/bin/perl') ? false : 'no perl here' }, async (t) => {
    const sub = /^sub connected_to \{\n[^]*?^\}\n/m.exec(await readFile(program, 'utf8'));
    assert.ok(sub, 'assume.pl has no connected_to');
    const server = net.createServer((s) => s.on('error', () => undefined));
    await new Promise<void>((r) => server.listen(0, '::', () => r()));
    const { port } = server.address() as net.AddressInfo;
    const sockets = ['127.0.0.7', '::ffff:127.0.0.9'].map((host) => net.connect({ port, host }));
    t.after(() => (sockets.forEach((s) => s.destroy()), server.close()));
    await Promise.all(sockets.map((s) => new Promise((r) => s.once('connect', r))));
    const ask = `print join(',', map { connected_to($_) } qw(127.0.0.7 127.0.0.9 127.0.0.8)), "\n";`;
    const { stdout } = await promisify(execFile)('/usr/bin/perl', ['-e', `use strict;\n${sub[0]}${ask}`]);
    assert.equal(stdout.trim(), '1,1,0');
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
