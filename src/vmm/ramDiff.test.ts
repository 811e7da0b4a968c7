import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { filterRamStream } from './ramDiff.ts';

// Streams in the layout QEMU 7.2 writes (savevm.c, ram.c): header, configuration, the RAM section's
// start (block list), parts of page records, its end, then device sections copied as they are.
const be32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const be64 = (n: number) => Buffer.concat([be32(Math.floor(n / 2 ** 32)), be32(n % 2 ** 32)]);
const id = (s: string) => Buffer.concat([Buffer.from([s.length]), Buffer.from(s)]);
const PAGE = 4096;
const ZERO = 0x02;
const MEM_SIZE = 0x04;
const PAGE_F = 0x08;
const EOS = 0x10;
const CONTINUE = 0x20;
const page = (fill: number) => Buffer.alloc(PAGE, fill);
const rec = (addr: number, flags: number, block: string | null, body: Buffer) => Buffer.concat([be64(addr + flags), block ? id(block) : Buffer.alloc(0), body]);
const footer = (sec: number) => Buffer.concat([Buffer.from([0x7e]), be32(sec)]);
const head = Buffer.concat([be32(0x5145564d), be32(3), Buffer.from([0x07]), be32(7), Buffer.from('microvm')]);
const start = Buffer.concat([Buffer.from([0x01]), be32(2), id('ram'), be32(0), be32(4), be64(5 * PAGE + MEM_SIZE), id('mem'), be64(4 * PAGE), id('rom'), be64(PAGE), be64(EOS), footer(2)]);
const devices = Buffer.concat([Buffer.from([0x04]), be32(3), id('cpu'), be32(0), be32(1), Buffer.from('device state'), footer(3), Buffer.from([0x00])]);

async function run(stream: Buffer, base: Buffer, chunk = 1000) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ramdiff-'));
  try {
    await writeFile(path.join(dir, 'base'), base);
    const fh = await open(path.join(dir, 'base'), 'r');
    const out: Buffer[] = [];
    async function* chunks() {
      for (let i = 0; i < stream.length; i += chunk) yield stream.subarray(i, i + chunk);
    }
    const result = await filterRamStream(chunks(), async (b) => void out.push(Buffer.from(b)), { fh, size: base.length, block: 'mem' });
    await fh.close();
    return { out: Buffer.concat(out), result };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('the saved difference of a RAM block over its base', () => {
  // The base: pages 0..3 of `mem` filled with 1, 2, 3, 4, and page 4 zero.
  const base = Buffer.concat([page(1), page(2), page(3), page(4), page(0)]);

  test('drops the pages equal to the base (zero pages over zero pages too), names the block of a record whose naming record was dropped, copies the rest', async () => {
    const part = Buffer.concat([
      Buffer.from([0x02]),
      be32(2),
      rec(0, PAGE_F, 'mem', page(1)), // equal: dropped
      rec(PAGE, PAGE_F | CONTINUE, null, page(9)), // differs: its block was named by the dropped record
      rec(0, PAGE_F, 'rom', page(1)), // another block: kept however it compares
      rec(2 * PAGE, PAGE_F, 'mem', page(3)), // equal: dropped
      rec(3 * PAGE, PAGE_F | CONTINUE, null, page(7)), // differs: the last written record was rom's
      rec(2 * PAGE, ZERO | CONTINUE, null, Buffer.from([0])), // a zero page over a non-zero base: kept
      rec(4 * PAGE, ZERO | CONTINUE, null, Buffer.from([0])), // a zero page over a zero base: dropped
      rec(5 * PAGE, ZERO | CONTINUE, null, Buffer.from([0])), // past the base's end: kept
      be64(EOS),
      footer(2),
    ]);
    const end = Buffer.concat([Buffer.from([0x03]), be32(2), rec(3 * PAGE, PAGE_F, 'mem', page(4)), be64(EOS), footer(2)]);
    for (const chunk of [1, 7, 1000, 1 << 20]) {
      const { out, result } = await run(Buffer.concat([head, start, part, end, devices]), base, chunk);
      const expected = Buffer.concat([
        head,
        start,
        Buffer.from([0x02]),
        be32(2),
        rec(PAGE, PAGE_F, 'mem', page(9)),
        rec(0, PAGE_F, 'rom', page(1)),
        rec(3 * PAGE, PAGE_F, 'mem', page(7)),
        rec(2 * PAGE, ZERO | CONTINUE, null, Buffer.from([0])),
        rec(5 * PAGE, ZERO | CONTINUE, null, Buffer.from([0])),
        be64(EOS),
        footer(2),
        Buffer.from([0x03]),
        be32(2),
        be64(EOS),
        footer(2),
        devices,
      ]);
      assert.ok(out.equals(expected), `chunks of ${chunk}`);
      assert.deepEqual(result, { dropped: 3, kept: 3, zero: 2, zeroDropped: 1, stoppedAt: null, blocks: ['mem', 'rom'], ramEnd: expected.length - devices.length });
    }
  });

  test('parses a stream saved with x-ignore-shared (a guest address after each block): where its RAM section ends', async () => {
    const shared = Buffer.concat([Buffer.from([0x01]), be32(2), id('ram'), be32(0), be32(4), be64(5 * PAGE + MEM_SIZE), id('mem'), be64(4 * PAGE), be64(0), id('rom'), be64(PAGE), be64(0xfffff000), be64(EOS), footer(2)]);
    const end = Buffer.concat([Buffer.from([0x03]), be32(2), rec(0, PAGE_F, 'rom', page(5)), be64(EOS), footer(2)]);
    const stream = Buffer.concat([head, shared, end, devices]);
    const parse = (ignoreShared: boolean) =>
      filterRamStream((async function* () { yield stream; })(), async () => undefined, null, { ignoreShared });
    const result = await parse(true);
    assert.equal(result.stoppedAt, null);
    assert.deepEqual(result.blocks, ['mem', 'rom']);
    assert.equal(result.ramEnd, stream.length - devices.length);
    // Read without the flag, the addresses are taken for block names: it stops, and says where.
    const wrong = await parse(false);
    assert.equal(wrong.ramEnd, null);
    assert.ok(wrong.stoppedAt);
  });

  test('a record it does not know ends the filtering: from there everything is copied', async () => {
    const part = Buffer.concat([
      Buffer.from([0x02]),
      be32(2),
      rec(0, PAGE_F, 'mem', page(1)), // dropped
      rec(PAGE, 0x40, 'mem', Buffer.from('xbzrle')), // XBZRLE: not known here
      rec(2 * PAGE, PAGE_F, 'mem', page(3)), // equal, but after the unknown record: copied
      be64(EOS),
      footer(2),
    ]);
    const { out, result } = await run(Buffer.concat([head, start, part, devices]), base);
    assert.ok(out.equals(Buffer.concat([head, start, Buffer.from([0x02]), be32(2), part.subarray(5 + 8 + 4 + PAGE), devices])));
    assert.equal(result.dropped, 1);
    assert.match(result.stoppedAt!, /0x40/);
  });

  test('a stream without a RAM section is copied whole', async () => {
    const stream = Buffer.concat([head, devices]);
    const { out, result } = await run(stream, base);
    assert.ok(out.equals(stream));
    assert.equal(result.dropped, 0);
    assert.ok(result.stoppedAt);
  });
});
