import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { STREAM_WINDOW } from '../wire/frames.ts';
import { StreamMux } from '../wire/streams.ts';
import { FramedReads, splice } from './egress.ts';

/**
 * A guest program that writes its whole answer and closes at once (a preview's app with `Connection:
 * close`): every byte reaches the host's end of the stream, and the end comes after them, however far
 * the stream's credit lags behind the program.
 */
for (const framed of [false, true]) {
test(`a program's last bytes before its close reach the host: the end waits for them (${framed ? 'reads into frames' : 'data events'})`, async (t) => {
  // A small start (a read copied into a frame of its own), then the rest at once (reads into whole frames).
  const answer = randomBytes(8 * 1024 * 1024);
  const app = net.createServer((s) => (s.write(answer.subarray(0, 100)), setImmediate(() => s.end(answer.subarray(100)))));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', () => r()));
  t.after(() => app.close());
  // Two muxes joined back to back; the port delivers later, as a real one does.
  let host!: StreamMux;
  const guest = new StreamMux((b) => setImmediate(() => host.feed(b)));
  host = new StreamMux((b) => setImmediate(() => guest.feed(b)));
  for (let id = 1; id <= 3; id++) {
    const gs = guest.open(id, STREAM_WINDOW);
    const reads = framed ? new FramedReads(gs) : undefined;
    const program = net.connect({ port: (app.address() as net.AddressInfo).port, host: '127.0.0.1', onread: reads?.onread });
    await new Promise((r) => program.once('connect', r));
    splice(program, gs, reads);
    const stream = host.open(id, STREAM_WINDOW);
    const got: Buffer[] = [];
    const outcome = await new Promise<string>((resolve) => {
      // A reader a little behind: its grants come back a turn later.
      stream.on('data', (b: Buffer) => (got.push(b), setImmediate(() => stream.consumed(b.length))));
      stream.on('end', () => resolve('end'));
      stream.on('abort', (f: { error: string }) => resolve(`abort ${f.error}`));
      stream.end();
    });
    assert.equal(outcome, 'end');
    const all = Buffer.concat(got);
    assert.equal(all.length, answer.length, `connection ${id}`);
    assert.equal(createHash('sha256').update(all).digest('hex'), createHash('sha256').update(answer).digest('hex'));
    // Read into frames, the 8 MiB come in frames larger than a socket's 64 KiB chunk.
    if (framed) assert.ok(Math.max(...got.map((b) => b.length)) > 64 * 1024, `largest frame ${Math.max(...got.map((b) => b.length))}`);
  }
});
}
