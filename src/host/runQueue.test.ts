import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunQueue } from './runQueue.ts';
import { ApiError } from '../domain/errors.ts';

const tick = () => new Promise((r) => setImmediate(r));

test('runs on one VM go one at a time in the order they came; other VMs do not wait', async () => {
  const q = new RunQueue(16);
  const log: string[] = [];
  const gates = new Map<string, () => void>();
  const job = (name: string) => () =>
    new Promise<string>((resolve) => {
      log.push(`start ${name}`);
      gates.set(name, () => (log.push(`end ${name}`), resolve(name)));
    });
  const a = q.run('vm_a', job('a1'));
  const b = q.run('vm_a', job('a2'));
  const other = q.run('vm_b', job('b1'));
  await tick();
  assert.deepEqual(log, ['start a1', 'start b1']);
  gates.get('a1')!();
  assert.equal(await a, 'a1');
  await tick();
  assert.deepEqual(log, ['start a1', 'start b1', 'end a1', 'start a2']);
  gates.get('a2')!();
  gates.get('b1')!();
  assert.deepEqual(await Promise.all([b, other]), ['a2', 'b1']);
});

test('a failed run does not hold the queue; a full queue refuses with 429 and Retry-After, then takes runs again', async () => {
  const q = new RunQueue(2); // one running, two waiting
  let release!: () => void;
  const running = q.run('vm_a', () => new Promise<void>((r) => (release = r)));
  const waiting = q.run('vm_a', async () => {
    throw new Error('the channel closed');
  });
  const second = q.run('vm_a', async () => 'second');
  assert.throws(
    () => q.run('vm_a', async () => 'third'),
    (err: unknown) => err instanceof ApiError && err.code === 'rate_limited' && err.headers?.['Retry-After'] === '5',
  );
  await tick(); // the first run has started
  release();
  await running;
  await assert.rejects(waiting, /the channel closed/);
  assert.equal(await second, 'second');
  assert.equal(await q.run('vm_a', async () => 'again'), 'again');
});
