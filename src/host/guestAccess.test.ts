import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { StreamMux } from '../wire/streams.ts';
import { streamBody } from './guestAccess.ts';

/** A guest's mux and a host's, joined back to back, with the wire pumped while `fn` runs. */
async function joined<T>(fn: (guest: StreamMux, host: StreamMux) => Promise<T>): Promise<T> {
  const wire = { gh: [] as Buffer[], hg: [] as Buffer[] };
  const guest = new StreamMux((b) => wire.gh.push(b));
  const host = new StreamMux((b) => wire.hg.push(b));
  const pump = setInterval(() => {
    for (const b of wire.gh.splice(0)) host.feed(b);
    for (const b of wire.hg.splice(0)) guest.feed(b);
  }, 1);
  try {
    return await fn(guest, host);
  } finally {
    clearInterval(pump);
  }
}

/** Reads a web stream to its end; answers the bytes, or null when it is not over within `ms`. */
async function readAll(body: ReadableStream<Uint8Array>, ms: number): Promise<Buffer | null> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const next = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, deadline - Date.now())))]);
    if (next === null) return null;
    if (next.done) return Buffer.concat(parts);
    parts.push(next.value);
  }
}

describe('a download from the guest as a response body', () => {
  test('with its size known, the body ends at its last byte without waiting for the guest to end the stream', async () => {
    await joined(async (guest, host) => {
      const data = randomBytes(300_000);
      const rx = host.open(3);
      const body = streamBody(rx, { size: data.length });
      const tx = guest.open(3);
      void tx.write(data); // and no end yet: the guest is slow to say it
      const got = await readAll(body, 10_000);
      assert.ok(got, 'the body ended');
      assert.ok(got.equals(data));
      tx.end({ size: data.length });
    });
  });

  test('bytes past the size are not sent; an empty file ends at once', async () => {
    await joined(async (guest, host) => {
      const rx = host.open(5);
      const body = streamBody(rx, { size: 10 });
      const tx = guest.open(5);
      void tx.write(Buffer.from('0123456789abcdef')).then(() => tx.end({ size: 16 }));
      assert.equal((await readAll(body, 10_000))?.toString(), '0123456789');
      const empty = streamBody(host.open(7), { size: 0 });
      assert.equal((await readAll(empty, 10_000))?.length, 0);
    });
  });

  test('with no size, the body ends when the guest ends the stream, not before', async () => {
    await joined(async (guest, host) => {
      const rx = host.open(9);
      const body = streamBody(rx);
      const tx = guest.open(9);
      await tx.write(Buffer.from('partial'));
      assert.equal(await readAll(body, 300), null, 'still open: the guest has not ended it');
    });
  });
});
