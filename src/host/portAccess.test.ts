import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamMux } from '../wire/streams.ts';
import { LocalPortAccess } from './portAccess.ts';
import type { QemuDriver } from '../vmm/qemu.ts';

/**
 * A host whose VM goes away while its guest connects to a port: the data channel cuts every stream, and
 * the guest's answer never comes. A test double of the driver's three calls around a real mux.
 */
test('a VM gone while its guest connects to a port: the caller gets an error, the process does not crash', async () => {
  const mux = new StreamMux(() => undefined);
  let next = 1;
  let answer!: (err: Error) => void;
  const driver = {
    dataReady: async () => undefined,
    dataChannel: () => ({ stream: (window?: number) => mux.open(next++, window) }),
    request: () => new Promise((_resolve, reject) => (answer = reject)),
  } as unknown as QemuDriver;
  const uncaught: Error[] = [];
  const onUncaught = (err: Error) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    const connecting = new LocalPortAccess(driver).connect('vm_gone', 8000);
    await new Promise((r) => setImmediate(r));
    // The channel's end cuts the stream first, then the request fails.
    mux.abortAll({ error: 'vm_gone', message: 'the VM is gone' });
    answer(Object.assign(new Error('the guest went away'), { code: 'vm_gone' }));
    await assert.rejects(connecting);
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(uncaught.map((e) => e.message), []);
  } finally {
    process.off('uncaughtException', onUncaught);
  }
});
