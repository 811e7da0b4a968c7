/** A QEMU's memory as the density benchmarks weigh it, from /proc. */
import { readFile } from 'node:fs/promises';

/** Its proportional set size (PSS), in KiB. */
export async function pssKib(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN);
}

/**
 * The part of a QEMU's PSS that is TCG's translated code: its code buffer is the one anonymous mapping
 * that is writable and executable (private, so its PSS is its RSS). A guest under KVM has none.
 */
export async function translatedKib(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps`, 'utf8');
  let kib = 0;
  for (const block of text.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const head = block.slice(0, block.indexOf('\n'));
    const [, perms, , , inode, name] = head.split(/\s+/);
    if (perms === 'rwxp' && inode === '0' && !name) kib += Number(/^Pss:\s+(\d+) kB/m.exec(block)?.[1] ?? 0);
  }
  return kib;
}
