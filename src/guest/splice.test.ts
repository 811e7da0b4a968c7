import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { STREAM_WINDOW } from '../wire/frames.ts';
import { StreamMux } from '../wire/streams.ts';
import { splice } from './egress.ts';

/**
 * A guest program that writes its whole answer and closes at once (a preview's app with `Connection:
 * close`): every byte reaches the host's end of the stream, and the end comes after them, however far
 * the stream's credit lags behind the program.
 */
test("a program's last bytes before its close reach the host: the end waits for them", async (t) => {
  const answer = randomBytes(8 * 1024 * 1024);
  const app = net.createServer((s) => s.end(answer));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', () => r()));
  t.after(() => app.close());
  // Two muxes joined back to back; the port delivers later, as a real one does.
  let host!: StreamMux;
  const guest = new StreamMux((b) => setImmediate(() => host.feed(b)));
  host = new StreamMux((b) => setImmediate(() => guest.feed(b)));
  for (let id = 1; id <= 3; id++) {
    const program = net.connect((app.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise((r) => program.once('connect', r));
    splice(program, guest.open(id, STREAM_WINDOW));
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
  }
});
