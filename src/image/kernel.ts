/**
 * The guest's kernel and initramfs: Debian's cloud kernel, resolved through the build host's apt and
 * unpacked from its package (vmlinux out of the bzImage, the virtio modules in dependency order), and
 * an initramfs of our own (BusyBox, those modules, our init) that loads them.
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, copyFile, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { done, runTool, sha256, type Progress } from './step.ts';

/**
 * The kernel comes from the build host's apt (Debian 12's cloud kernel, 6.1, on these hosts): it is
 * resolved before anything is built, and trixie's userland runs on it.
 */
const KERNEL_META_PACKAGE = 'linux-image-cloud-amd64';
/** Loaded by the initramfs, dependencies first (the builder also reads each module's own `depends=`). */
export const GUEST_MODULES = [
  'virtio_ring', 'virtio', 'virtio_mmio', 'virtio_blk', 'virtio_console', 'failover', 'net_failover', 'virtio_net', 'virtio-rng',
  // A VM's own disks are SCSI disks (plugged into a resumed clone); its root is an overlay.
  'virtio_scsi', 'sd_mod', 'overlay',
  // Sockets can be ended from outside (`ss -K`, with the kernel's INET_DIAG_DESTROY): a resumed guest's
  // assume program ends its connections through the gateway, which did not survive the suspend.
  'tcp_diag',
];

/** The kernel package the build host's apt offers for KERNEL_META_PACKAGE, and its version. */
export interface KernelPackage {
  name: string;
  version: string;
}

export async function resolveKernelPackage(): Promise<KernelPackage> {
  const query = async () => {
    const deps = await runTool('apt-cache', ['depends', KERNEL_META_PACKAGE]);
    const name = /Depends:\s*(linux-image-\S+-cloud-amd64)/.exec(deps)?.[1];
    if (!name) throw new Error(`cannot resolve ${KERNEL_META_PACKAGE}`);
    const show = await runTool('apt-cache', ['show', '--no-all-versions', name]);
    const version = /^Version:\s*(\S+)/m.exec(show)?.[1];
    if (!version) throw new Error(`no version for ${name}`);
    return { name, version };
  };
  try {
    return await query();
  } catch {
    await runTool('apt-get', ['update', '-qq']);
    return query();
  }
}

/** Finds the uncompressed kernel inside a bzImage through its setup header, and inflates it. */
async function extractVmlinux(bzImage: string, out: string): Promise<void> {
  const data = await readFile(bzImage);
  const setupSects = data[0x1f1] || 4;
  const payloadOffset = data.readUInt32LE(0x248);
  const payloadLength = data.readUInt32LE(0x24c);
  const start = (setupSects + 1) * 512 + payloadOffset;
  const payload = data.subarray(start, start + payloadLength);
  const magic = payload.subarray(0, 6).toString('hex');
  const tool: [string, string[]] | null = magic.startsWith('02214c18')
    ? ['lz4', ['-dc']]
    : magic.startsWith('28b52ffd')
      ? ['zstd', ['-dc']]
      : magic.startsWith('fd377a585a00')
        ? ['xz', ['-dc']]
        : null;
  const tmp = `${out}.tmp`;
  if (magic.startsWith('1f8b')) {
    await pipeline(createReadStream(bzImage, { start, end: start + payloadLength - 1 }), createGunzip(), createWriteStream(tmp));
  } else if (tool) {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(tool[0], tool[1], { stdio: ['pipe', 'pipe', 'ignore'] });
      const sink = createWriteStream(tmp);
      child.stdout.pipe(sink);
      child.on('error', reject);
      // lz4's legacy frame may carry trailing bytes it reports as an error; the ELF check below decides.
      sink.on('finish', () => resolve());
      child.stdin.on('error', () => undefined);
      child.stdin.end(payload);
    });
  } else {
    throw new Error(`unknown kernel compression (magic ${magic})`);
  }
  const head = await readFile(tmp).then((b) => b.subarray(0, 4));
  if (head.toString('latin1') !== '\x7fELF') throw new Error('the inflated kernel is not an ELF file');
  await rename(tmp, out);
}

/** The `depends=` field of a kernel module's .modinfo section. */
async function moduleDepends(file: string): Promise<string[]> {
  const text = (await readFile(file)).toString('latin1');
  const m = /\0depends=([^\0]*)\0/.exec(text);
  return m && m[1] ? m[1].split(',').filter(Boolean) : [];
}

async function findFiles(dir: string, pred: (name: string) => boolean, found: Map<string, string> = new Map()): Promise<Map<string, string>> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await findFiles(full, pred, found);
    else if (pred(entry.name)) found.set(entry.name, full);
  }
  return found;
}

/** Debian's kernel package unpacked (cached): vmlinux, the guest's modules with their load order, and its release. */
export async function buildKernel(cacheDir: string, kernel: KernelPackage, progress: Progress): Promise<{ dir: string; release: string }> {
  const dir = path.join(cacheDir, 'kernel', `${kernel.name}_${kernel.version}_${sha256(GUEST_MODULES.join(',')).slice(0, 8)}`);
  if (await done(dir)) return { dir, release: (await readFile(path.join(dir, 'release'), 'utf8')).trim() };
  progress(`kernel: downloading ${kernel.name} ${kernel.version}`);
  const work = `${dir}.work`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  await chmod(work, 0o777); // apt's download user writes here
  await runTool('apt-get', ['download', '-q', `${kernel.name}=${kernel.version}`], { cwd: work });
  const deb = (await readdir(work)).find((f) => f.endsWith('.deb'));
  if (!deb) throw new Error('apt-get download produced no package');
  await runTool('dpkg', ['-x', deb, 'x'], { cwd: work });
  const vmlinuz = (await readdir(path.join(work, 'x/boot'))).find((f) => f.startsWith('vmlinuz-'));
  if (!vmlinuz) throw new Error('the kernel package holds no vmlinuz');
  const release = vmlinuz.slice('vmlinuz-'.length);
  progress('kernel: unpacking vmlinux and the virtio modules');
  await mkdir(path.join(work, 'out/modules'), { recursive: true });
  await extractVmlinux(path.join(work, 'x/boot', vmlinuz), path.join(work, 'out/vmlinux'));
  const modules = await findFiles(path.join(work, 'x/lib/modules'), (n) => n.endsWith('.ko'));
  // Order: every module after what it depends on.
  const order: string[] = [];
  const visit = async (name: string, seen: Set<string>) => {
    if (order.includes(name) || seen.has(name)) return;
    seen.add(name);
    const file = modules.get(`${name}.ko`) ?? modules.get(`${name.replace(/_/g, '-')}.ko`);
    if (!file) throw new Error(`kernel module ${name} is not in ${kernel.name}`);
    for (const dep of await moduleDepends(file)) await visit(dep, seen);
    await copyFile(file, path.join(work, 'out/modules', path.basename(file)));
    order.push(path.basename(file, '.ko'));
  };
  for (const m of GUEST_MODULES) await visit(m, new Set());
  await writeFile(path.join(work, 'out/modules/order'), `${order.join('\n')}\n`);
  await writeFile(path.join(work, 'out/release'), `${release}\n`);
  await writeFile(path.join(work, 'out/.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(path.join(work, 'out'), dir);
  await rm(work, { recursive: true, force: true });
  return { dir, release };
}

async function listTree(root: string, rel = '.'): Promise<string[]> {
  const out = [rel];
  for (const entry of await readdir(path.join(root, rel), { withFileTypes: true })) {
    const child = rel === '.' ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await listTree(root, child)));
    else out.push(child);
  }
  return out;
}

/** The initramfs: BusyBox, the kernel's guest modules and our init, as a gzipped newc cpio. */
export async function buildInitramfs(kernelDir: string, initScript: string, out: string): Promise<void> {
  const staging = `${out}.staging`;
  await rm(staging, { recursive: true, force: true });
  for (const d of ['bin', 'dev', 'proc', 'sys', 'newroot', 'modules']) await mkdir(path.join(staging, d), { recursive: true });
  const busybox = '/bin/busybox';
  await copyFile(busybox, path.join(staging, 'bin/busybox'));
  await chmod(path.join(staging, 'bin/busybox'), 0o755);
  for (const f of await readdir(path.join(kernelDir, 'modules'))) await copyFile(path.join(kernelDir, 'modules', f), path.join(staging, 'modules', f));
  await writeFile(path.join(staging, 'init'), initScript, { mode: 0o755 });
  const files = await listTree(staging);
  await new Promise<void>((resolve, reject) => {
    const cpio = spawn('cpio', ['-o', '-H', 'newc', '--quiet', '-R', '0:0'], { cwd: staging, stdio: ['pipe', 'pipe', 'inherit'] });
    cpio.on('error', reject);
    pipeline(cpio.stdout, createGzip({ level: 6 }), createWriteStream(out)).then(resolve, reject);
    cpio.stdin.end(`${files.join('\n')}\n`);
  });
  await rm(staging, { recursive: true, force: true });
}
