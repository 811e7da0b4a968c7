/** What a VM takes of its host: its disks' bytes, and under TCG the guest code its QEMU translated. */
import { stat } from 'node:fs/promises';
import { qmp } from './channel.ts';
import type { MachineFiles } from './machine.ts';
import type { Handle } from './running.ts';

/** Bytes the VM's disks take on the host. */
export async function diskUsage(f: MachineFiles): Promise<number> {
  let total = 0;
  for (const p of [f.upper, f.persist]) total += await stat(p).then((s) => s.blocks * 512).catch(() => 0);
  return total;
}

/** What a QEMU under TCG has translated so far, by its own count (HMP `info jit`). */
export async function translated(h: Handle): Promise<{ blocks: number; codeBytes: number } | null> {
  const text = await qmp<string>(h.qmp, 'human-monitor-command', { 'command-line': 'info jit' }, 5000);
  const blocks = /^TB count\s+(\d+)/m.exec(text);
  const code = /^gen code size\s+(\d+)/m.exec(text);
  return blocks && code ? { blocks: Number(blocks[1]), codeBytes: Number(code[1]) } : null;
}
