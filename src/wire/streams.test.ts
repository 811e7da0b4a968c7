import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { DIRECT_BLOCK, framePayload, STREAM_WINDOW } from './frames.ts';
import type { MuxStream } from './muxStream.ts';
import { StreamMux } from './streams.ts';
import { filesPath } from './protocol.ts';

/** Two muxes joined back to back; what one sends reaches the other cut into pieces of `cut` bytes, later. */
function pair(cut: number) {
  const wire = { ab: [] as Buffer[], ba: [] as Buffer[] };
  const a = new StreamMux((b) => wire.ab.push(b));
  const b = new StreamMux((x) => wire.ba.push(x));
  const pump = () => {
    let moved = false;
    for (const [from, to] of [[wire.ab, b], [wire.ba, a]] as const) {
      const all = Buffer.concat(from.splice(0));
      for (let i = 0; i < all.length; i += cut) to.feed(all.subarray(i, i + cut));
      moved ||= all.length > 0;
    }
    return moved;
  };
  return { a, b, pump, wire };
}

describe('the data port streams', () => {
  test('bytes, an end and a control message arrive whole and in order, however the port cuts them', async () => {
    for (const cut of [1, 7, 4096, 1 << 20]) {
      const { a, b, pump } = pair(cut);
      const data = randomBytes(700_000);
      const got: Buffer[] = [];
      const events: string[] = [];
      const rx = b.open(5);
      rx.on('data', (c: Buffer) => (got.push(Buffer.from(c)), rx.consumed(c.length)));
      rx.on('control', (m) => events.push(`control ${JSON.stringify(m)}`));
      rx.on('end', (m) => events.push(`end ${JSON.stringify(m)}`));
      const tx = a.open(5);
      tx.control({ type: 'resize', cols: 80, rows: 24 });
      const sent = tx.write(data).then(() => tx.end({ size: data.length }));
      while (pump() || !events.some((e) => e.startsWith('end'))) await new Promise((r) => setImmediate(r));
      await sent;
      assert.ok(Buffer.concat(got).equals(data), `cut ${cut}`);
      assert.deepEqual(events, ['control {"type":"resize","cols":80,"rows":24}', `end {"size":${data.length}}`]);
    }
  });

  test('a writer waits for credit: no more than a window is ever in flight unread', async () => {
    const { a, b, pump, wire } = pair(65536);
    const rx = b.open(1);
    const held: Buffer[] = [];
    rx.on('data', (c: Buffer) => held.push(c));
    const tx = a.open(1);
    let done = false;
    void tx.write(Buffer.alloc(3 * STREAM_WINDOW)).then(() => (done = true));
    for (let i = 0; i < 20; i++) (pump(), await new Promise((r) => setImmediate(r)));
    assert.equal(held.reduce((n, c) => n + c.length, 0), STREAM_WINDOW, 'one window, then it waits');
    assert.equal(done, false);
    assert.equal(wire.ab.length, 0);
    // The reader deals with what it has: the writer goes on.
    rx.consumed(STREAM_WINDOW);
    for (let i = 0; i < 20; i++) (pump(), await new Promise((r) => setImmediate(r)));
    assert.equal(held.reduce((n, c) => n + c.length, 0), 2 * STREAM_WINDOW);
  });

  test('an abort reaches the other side with its reason and ends waiting writes; a closed port cuts every stream', async () => {
    const { a, b, pump } = pair(1000);
    const rx = b.open(9);
    const tx = a.open(9);
    const reasons: unknown[] = [];
    tx.on('abort', (f) => reasons.push(f));
    const blocked = tx.write(Buffer.alloc(STREAM_WINDOW + 10));
    pump();
    rx.abort({ error: 'payload_too_large', message: 'too big' });
    pump();
    await assert.rejects(blocked, /too big/);
    assert.deepEqual(reasons, [{ error: 'payload_too_large', message: 'too big' }]);
    assert.equal(a.has(9), false);
    assert.equal(b.has(9), false);
    const other: MuxStream = a.open(10);
    const cut: unknown[] = [];
    other.on('abort', (f) => cut.push(f));
    a.closeAll({ error: 'vm_not_running', message: 'the VM stopped' });
    assert.deepEqual(cut, [{ error: 'vm_not_running', message: 'the VM stopped' }]);
  });

  test("a side's frames are never larger than its limit (the guest's fit one port write)", async () => {
    const frames: Buffer[] = [];
    const m = new StreamMux((b) => frames.push(b), 32 * 1024 - 9);
    await m.open(3).write(Buffer.alloc(200_000));
    assert.ok(frames.every((f) => f.length <= 32 * 1024));
    assert.equal(frames.reduce((n, f) => n + f.length - 9, 0), 200_000);
  });

  test('a frame larger than the protocol allows is refused', () => {
    const m = new StreamMux(() => undefined);
    const h = Buffer.alloc(9);
    h.writeUInt32BE(1, 0);
    h.writeUInt8(0, 4);
    h.writeUInt32BE(64 * 1024 * 1024, 5);
    assert.throws(() => m.feed(h), /too large/);
  });
});

describe('file paths by their letters', () => {
  test('relative paths are under the workspace; absolute ones under /persist; escapes are refused', () => {
    assert.deepEqual(filesPath('notes.md'), { path: '/persist/workspace/notes.md' });
    assert.deepEqual(filesPath('./a//b/'), { path: '/persist/workspace/a/b' });
    assert.deepEqual(filesPath('.'), { path: '/persist/workspace' });
    assert.deepEqual(filesPath('/persist/home/.config/x'), { path: '/persist/home/.config/x' });
    assert.deepEqual(filesPath('/persist'), { path: '/persist' });
    for (const bad of ['', '../x', 'a/../b', '/etc/passwd', '/persistent', '/persist/.agentvm/secrets.json', '/persist/.agentvm', 'a\0b', 'x'.repeat(5000)]) {
      assert.ok('problem' in filesPath(bad), JSON.stringify(bad.slice(0, 40)));
    }
  });
});

describe('bulk frames and the port writer', () => {
  test('frames made in place go out whole, as views of their one buffer, each once the window has room for it', async () => {
    const sent: Buffer[] = [];
    const written: string[] = [];
    const a = new StreamMux((b, w) => (sent.push(b), w?.()));
    const b = new StreamMux(() => undefined);
    const tx = a.open(4, 512 * 1024);
    const rx = b.open(4, 512 * 1024);
    const got: Buffer[] = [];
    rx.on('data', (c: Buffer) => got.push(Buffer.from(c)));
    const data = randomBytes(700_000);
    const block = Buffer.alloc(1024 * 1024);
    const { frames, payloads } = tx.framesFor(data.length, block);
    let at = 0;
    for (const p of payloads) at += data.copy(p, 0, at);
    assert.equal(at, data.length);
    assert.ok(frames.every((f) => f.buffer === block.buffer && f.length <= a.maxData));
    let done = false;
    void tx.writeFrames(frames, () => written.push('block')).then(() => (done = true));
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    // 512 KiB of window: two frames of just under 256 KiB fit, the last (the rest) waits.
    assert.equal(sent.length, 2);
    assert.equal(done, false);
    assert.deepEqual(written, []);
    for (const f of sent) b.feed(f);
    rx.consumed(sent.reduce((n, f) => n + f.length - 9, 0));
    // b's credit frame, back to a.
    const credit = Buffer.alloc(13);
    credit.writeUInt32BE(4, 0);
    credit.writeUInt8(2, 4);
    credit.writeUInt32BE(4, 5);
    credit.writeUInt32BE(2 * (a.maxData - 9), 9);
    a.feed(credit);
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    assert.equal(done, true);
    assert.equal(sent.length, 3);
    assert.deepEqual(written, ['block'], 'told once, after the last frame');
    b.feed(sent[2]);
    assert.ok(Buffer.concat(got).equals(data));
  });

  test('frames laid out for a read past the page cache: payloads 4-byte aligned, whole blocks but the last, room to round it up', () => {
    const mux = new StreamMux(() => undefined);
    const tx = mux.open(7, 512 * 1024);
    const per = framePayload(mux.maxData, true);
    assert.equal(per % DIRECT_BLOCK, 0);
    const bytes = 3 * per + 1000;
    const block = Buffer.alloc(4 * mux.maxData);
    const { frames, payloads } = tx.framesFor(bytes, block, true);
    assert.deepEqual(payloads.map((p) => p.length), [per, per, per, 1000]);
    for (const [i, p] of payloads.entries()) {
      assert.equal((p.byteOffset - block.byteOffset) % 4, 0, `payload ${i} starts 4-byte aligned`);
      assert.equal(frames[i].length, p.length + 9);
      assert.ok(frames[i].length <= mux.maxData);
      assert.equal(frames[i].readUInt32BE(5), p.length);
    }
    const last = payloads[3];
    assert.ok(last.byteOffset - block.byteOffset + DIRECT_BLOCK * 2 <= block.length, 'the last read can go on to a whole block');
    assert.throws(() => tx.framesFor(4 * per, Buffer.alloc(4 * per)), /do not fit/);
  });

  test("a stream's window is its own: a wide one lets that much out, and grants come a quarter of it at a time", async () => {
    const { a, b, pump, wire } = pair(65536);
    const wide = 8 * 1024 * 1024;
    const rx = b.open(2, wide);
    const held: Buffer[] = [];
    rx.on('data', (c: Buffer) => held.push(c));
    const tx = a.open(2, wide);
    void tx.write(Buffer.alloc(2 * wide));
    for (let i = 0; i < 20; i++) (pump(), await new Promise((r) => setImmediate(r)));
    assert.equal(held.reduce((n, c) => n + c.length, 0), wide);
    rx.consumed(wide / 4 - 1);
    assert.equal(wire.ba.length, 0, 'no grant below a quarter of the window');
    rx.consumed(1);
    assert.equal(wire.ba.length, 1);
    for (let i = 0; i < 20; i++) (pump(), await new Promise((r) => setImmediate(r)));
    assert.equal(held.reduce((n, c) => n + c.length, 0), wide + wide / 4);
    assert.throws(() => a.open(3, 1000), /bad stream window/);
  });
});
