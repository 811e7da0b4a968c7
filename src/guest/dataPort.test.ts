import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { skip, takeBatch } from './dataPort.ts';

test('the port writer takes frames of one buffer as one run, gathers small ones, and cuts at what the kernel takes a write', () => {
  const block = randomBytes(600_000);
  const small = [Buffer.from('abc'), Buffer.from('defg')];
  const calls: string[] = [];
  const queue = [
    { bytes: small[0] },
    { bytes: block.subarray(0, 250_000) },
    { bytes: block.subarray(250_000, 600_000), written: () => calls.push('block') },
    { bytes: small[1], written: () => calls.push('small') },
  ];
  const all = Buffer.concat(queue.map((q) => q.bytes));
  const { pieces, written } = takeBatch(queue);
  assert.equal(queue.length, 0);
  assert.ok(Buffer.concat(pieces).equals(all), 'every byte, in order');
  assert.ok(pieces.every((p) => p.length <= 32 * 1024));
  assert.equal(pieces.length, 2 + Math.ceil(600_000 / 32768), 'the two runs of the block are one');
  written.forEach((w) => w());
  assert.deepEqual(calls, ['block', 'small']);
  const rest = skip(pieces, 40_000);
  assert.ok(Buffer.concat(rest).equals(all.subarray(40_000)));
  assert.deepEqual(skip(pieces, all.length), []);
});
