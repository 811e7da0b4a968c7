import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../src/log.ts';

function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { log: createLogger('info', sink), lines: () => lines.map((l) => JSON.parse(l)) };
}

test('an error is logged as an object with its message and stack', async () => {
  const { log, lines } = capture();
  log.warn({ err: new Error('the guest did not answer') }, 'boot failed');
  log.warn({ err: 'not an Error' }, 'a string where an error goes');
  log.flush();
  await new Promise((r) => setImmediate(r));
  const [first, second] = lines();
  assert.equal(first.err.message, 'the guest did not answer');
  assert.equal(first.err.type, 'Error');
  assert.match(first.err.stack, /log\.test\.ts/);
  assert.deepEqual(second.err, { type: 'string', message: 'not an Error' });
});

test('a database error keeps its query parameters out of the log', async () => {
  const { log, lines } = capture();
  const err = Object.assign(new Error('duplicate key'), { params: ['avm_live_secret'] });
  log.error({ err }, 'insert failed');
  log.flush();
  await new Promise((r) => setImmediate(r));
  const [line] = lines();
  assert.equal(line.err.message, 'duplicate key');
  assert.equal(JSON.stringify(line).includes('avm_live_secret'), false);
});
