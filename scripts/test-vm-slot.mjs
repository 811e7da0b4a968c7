// Imported (--import) into every test file's process by `npm test`, which runs two files at a time:
// a file that boots real VMs (its source names AGENTVM_TEST_IMAGE_DIR) first waits for one of the
// run's VM slots (AGENTVM_TEST_VM_SLOTS, default 1), while the files without VMs run beside them.
// A slot is a directory (mkdir is atomic) named by the test runner's pid and the slot's number,
// holding its holder's pid: a holder that died without freeing it is seen. The wait is written to
// stderr for scripts/test-report.mjs, so a file's time is its own.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const file = process.argv[1];
const SLOTS = Math.max(1, Number(process.env.AGENTVM_TEST_VM_SLOTS) || 1);
const slots = Array.from({ length: SLOTS }, (_, i) => path.join(tmpdir(), `agentvm-test-vm-slot-${process.ppid}-${i + 1}`));

function needsVms() {
  try {
    return file && /\.test\.ts$/.test(file) && readFileSync(file, 'utf8').includes('AGENTVM_TEST_IMAGE_DIR');
  } catch {
    return false;
  }
}

function holderGone(slot) {
  let pid;
  try {
    pid = Number(readFileSync(path.join(slot, 'pid'), 'utf8'));
  } catch {
    return false; // taken a moment ago: its pid comes next
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return err.code === 'ESRCH';
  }
}

if (process.env.AGENTVM_TEST_IMAGE_DIR && needsVms()) {
  const t0 = Date.now();
  let held;
  while (!held) {
    for (const slot of slots) {
      try {
        mkdirSync(slot);
        held = slot;
        break;
      } catch (err) {
        if (err.code !== 'EEXIST') throw err;
      }
      if (holderGone(slot)) rmSync(slot, { recursive: true, force: true });
    }
    if (!held) await new Promise((r) => setTimeout(r, 250));
  }
  writeFileSync(path.join(held, 'pid'), String(process.pid));
  process.on('exit', () => rmSync(held, { recursive: true, force: true }));
  const waited = Date.now() - t0;
  if (waited > 1000) process.stderr.write(`agentvm-test-vm-slot: waited ${waited} ms\n`);
}
