/**
 * The layers of an image build, taken from its builder's root disk while the builder runs
 * (host/imageBuilder.ts). After a step, the disk QEMU writes gets a new, empty top
 * (`blockdev-snapshot-sync` of an existing file, as a snapshot freezes a disk: branch.ts), so the
 * file written until then is written no more: it is the step's layer, and is linked into the layers'
 * folder under its cache name, not copied. The new top's header names that layer (QEMU reads no
 * header's backing when it takes a top: it stacks the top on the disk it has), so once it is a layer
 * in its turn, its chain is whole without the builder. Only the builder's first layer is a copy
 * (qemu-img convert), of what its disk holds over the layer it started from (over the blank
 * filesystem, the whole filesystem).
 *
 * Before, every layer was such a copy of all the builder had written since it started: a build of a
 * 20 MB step and three small ones kept 90 MB of layers, and each copy read all of it again.
 */
import { randomBytes } from 'node:crypto';
import { chmod, chown, link, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { emptyTopOver, placeTopLike, qcow2Size, runQemuImg } from './disks.ts';
import { isolating } from './isolation.ts';
import type { RunningMachine } from './branch.ts';

/** A builder's root disk as its layers are taken: the file QEMU writes now, and how many were taken. */
export interface BuilderDisk {
  /** Null: the VM's own upper.qcow2. */
  top: string | null;
  taken: number;
}

export const builderDisk = (): BuilderDisk => ({ top: null, taken: 0 });

/**
 * Takes what the builder wrote since its last layer (its guest flushed or frozen) as the layer `out`,
 * over `under` (the layer the builder's disk stood on when it started, for its first one). Resolves
 * once the builder writes a new top; the promise it answers resolves once `out` is whole (at once for
 * a link; the first layer's copy goes on while the builder runs its next step).
 */
export async function takeLayer(m: RunningMachine, vmDir: string, disk: BuilderDisk, out: string, under: string | null): Promise<{ whole: Promise<void> }> {
  const active = disk.top ?? path.join(vmDir, 'upper.qcow2');
  const n = disk.taken + 1;
  const next = path.join(vmDir, `upper.build-${n}.qcow2`);
  await placeTopLike(active, next, await emptyTopOver(out, await qcow2Size(active), vmDir));
  // The file before keeps its name while the builder runs: QEMU reopens it by it, read-only.
  await m.qmp('blockdev-snapshot-sync', { device: 'upper', 'snapshot-file': next, 'snapshot-node-name': `upper-build-${n}`, format: 'qcow2', mode: 'existing' });
  disk.top = next;
  disk.taken = n;
  const tmp = `${out}.${randomBytes(6).toString('hex')}.tmp`;
  const place = async (make: () => Promise<void>) => {
    try {
      await make();
      await rename(tmp, out);
    } finally {
      await rm(tmp, { force: true });
    }
  };
  if (n === 1) return { whole: place(() => runQemuImg(['convert', '-U', '-O', 'qcow2', ...(under ? ['-B', under, '-F', 'qcow2'] : []), active, tmp]).then(() => undefined)) };
  await place(async () => {
    await link(active, tmp);
    // Layers are the host's (root, 0644): many QEMUs read them, none writes them.
    if (isolating()) await chown(tmp, 0, 0);
    await chmod(tmp, 0o644);
  });
  return { whole: Promise.resolve() };
}
