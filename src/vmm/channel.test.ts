/**
 * The control socket of a real QEMU: one client at a time. A try that got no answer in time must not
 * keep the monitor from the next.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { connectQmp, qmp } from './channel.ts';

test('connectQmp: a try QEMU did not answer in time is closed, and the next one reaches the monitor', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-qmp-'));
  const sock = path.join(dir, 'qmp.sock');
  const qemu = spawn('qemu-system-x86_64', ['-machine', 'none', '-nographic', '-nodefaults', '-monitor', 'none', '-serial', 'none', '-S', '-qmp', `unix:${sock},server=on,wait=off`], { stdio: 'ignore' });
  t.after(async () => {
    if (qemu.exitCode === null && qemu.signalCode === null) {
      qemu.kill('SIGKILL');
      await once(qemu, 'exit');
    }
    await rm(dir, { recursive: true, force: true });
  });
  // Its socket first, then a QEMU too busy to answer (stopped: the kernel still takes connections).
  const first = await (async () => {
    for (;;) {
      if (existsSync(sock)) {
        const ch = await connectQmp(sock, 2000).catch(() => null);
        if (ch) return ch;
      }
      await new Promise((r) => setImmediate(r));
    }
  })();
  first.close();
  await once(first, 'close');
  qemu.kill('SIGSTOP');
  await assert.rejects(connectQmp(sock, 100), /no answer within 100 ms/);
  qemu.kill('SIGCONT');
  const ch = await connectQmp(sock, 5000);
  assert.equal((await qmp<{ status: string }>(ch, 'query-status')).status, 'prelaunch');
  ch.close();
});
