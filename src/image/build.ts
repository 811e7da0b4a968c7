/**
 * The guest image pipeline: Debian's cloud kernel and an initramfs of our own that loads the virtio
 * modules (kernel.ts), a Debian 13 root made by debootstrap holding a workstation's toolchain
 * (workstation.ts), the guest agent and the harness programs (harnesses.ts), and an ext4 base image.
 * Everything is content-addressed under the image dir: an image's id is a hash of every input, so
 * nothing is rebuilt unless an input changed, and finished steps are kept.
 */
import { chmod, chown, copyFile, link, mkdir, open, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as esbuild } from 'esbuild';
import { E2B_HOME, EGRESS_GATEWAY_URL, GUEST_AWK, WORKSPACE } from '../wire/protocol.ts';
import { buildHarnesses, buildNpm, harnessesKey, npmKey } from './harnesses.ts';
import { buildInitramfs, buildKernel, GUEST_MODULES, resolveKernelPackage, type KernelPackage } from './kernel.ts';
import { BUILDER_VERSION, done, runTool, sha256, type Progress } from './step.ts';
import { configureWorkstation, DPKG_QUERY_ARGS, loginFiles, NPM_PACKAGE, parseDpkgQuery, proxyFiles, ROOT_PACKAGES, workstationInputs, type PackageVersion } from './workstation.ts';

/** Debian 13: its Node 20 runs gemini-cli, which Debian 12's Node 18 cannot. */
const SUITE = 'trixie';
const ROOTFS_SIZE = '4G';

/** The unprivileged user that runs harnesses (uid 1000). */
export const GUEST_USER = { name: 'agent', uid: 1000, gid: 1000, home: '/home/agent' };

const here = path.dirname(fileURLToPath(import.meta.url));

export interface Image {
  id: string;
  dir: string;
  kernel: string;
  initramfs: string;
  rootfs: string;
  manifest: ImageManifest;
}

export interface ImageManifest {
  id: string;
  kernel_package: string;
  kernel_version: string;
  kernel_release: string;
  suite: string;
  /** What is installed in the root: its Debian packages (dpkg-query) and npm, by name. */
  packages: PackageVersion[];
  built_at: string;
  /** The root filesystem's file (sparse: its size is the root's capacity). */
  rootfs_bytes: number;
  /** What the image takes on disk: the blocks the root filesystem's file holds, the kernel and the initramfs. */
  size_bytes: number;
  /** How long the build of this image took, in milliseconds (its cached steps cost nothing). */
  build_ms: number;
  /** Harness id → the pinned packages its program came from. */
  harnesses: Record<string, string[]>;
  /** Harness id → why the image does not carry it. */
  unavailable: Record<string, string>;
}

interface Inputs {
  kernel: KernelPackage;
  mirror: string;
  agentBundle: string;
  initScript: string;
  /** The diagnostic harnesses' programs (DIAGNOSTIC_PROGRAMS), in that order. */
  diagnostics: string[];
}

/**
 * The files of /etc that name a VM, links into the tmpfs `/run` (IDENTITY_DIR): the assume program
 * writes them at every start, a standby's second line among them, and on tmpfs that write is memory
 * only, not a block allocated and written back on the root's layer while other VMs start.
 */
const IDENTITY_FILES = ['hostname', 'machine-id', 'hosts', 'resolv.conf'];
const IDENTITY_DIR = '/run/agentvm/etc';

/** The diagnostic harnesses' programs, in this repository (src/image/files), installed in /usr/local/bin. */
const DIAGNOSTIC_PROGRAMS = ['agentvm-echo', 'agentvm-ticker'];

async function debianMirror(): Promise<string> {
  if (process.env.AGENTVM_DEBIAN_MIRROR) return process.env.AGENTVM_DEBIAN_MIRROR;
  for (const file of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    const m = /^URIs:\s*(\S+\/debian)\s*$/m.exec(text) ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\s+/m.exec(text);
    if (m) return m[1];
  }
  return 'http://deb.debian.org/debian';
}

/** The guest agent as one ES module for the guest's Node. */
export async function bundleAgent(): Promise<string> {
  const result = await esbuild({
    entryPoints: [path.join(here, '../guest/agent.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Programs the agent runs (assume.pl) are their own files, inlined as text.
    loader: { '.pl': 'text' },
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0].text;
}

async function inputs(): Promise<Inputs> {
  const [kernel, mirror, agentBundle, initScript, diagnostics] = await Promise.all([
    resolveKernelPackage(),
    debianMirror(),
    bundleAgent(),
    readFile(path.join(here, 'files/init.sh'), 'utf8'),
    Promise.all(DIAGNOSTIC_PROGRAMS.map((p) => readFile(path.join(here, 'files', p), 'utf8'))),
  ]);
  return { kernel, mirror, agentBundle, initScript, diagnostics };
}

function rootfsBaseKey(i: Inputs): string {
  return sha256(String(BUILDER_VERSION), SUITE, i.mirror, workstationInputs(GUEST_USER.name, SUITE), JSON.stringify(GUEST_USER)).slice(0, 16);
}

function imageIdOf(i: Inputs): string {
  return sha256(String(BUILDER_VERSION), harnessesKey(), npmKey(), i.kernel.name, i.kernel.version, rootfsBaseKey(i), i.agentBundle, i.initScript, ...i.diagnostics, GUEST_MODULES.join(','), ROOTFS_SIZE, `${IDENTITY_DIR}:${IDENTITY_FILES.join(',')}`, GUEST_AWK, `${E2B_HOME}->${WORKSPACE}`, JSON.stringify([...proxyFiles(EGRESS_GATEWAY_URL), ...loginFiles()])).slice(0, 20);
}

/** The id the current inputs make, whether or not it is built. */
export async function currentImageId(): Promise<string> {
  return imageIdOf(await inputs());
}

export async function loadImage(imageDir: string, id: string): Promise<Image | null> {
  const dir = path.join(imageDir, id);
  try {
    const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ImageManifest;
    return { id, dir, kernel: path.join(dir, 'vmlinux'), initramfs: path.join(dir, 'initramfs.cpio.gz'), rootfs: path.join(dir, 'rootfs.ext4'), manifest };
  } catch {
    return null;
  }
}

/** The debootstrapped root as a tree, and its installed Debian packages. */
async function buildRootfsBase(cacheDir: string, i: Inputs, progress: Progress): Promise<{ tree: string; packages: PackageVersion[] }> {
  const dir = path.join(cacheDir, 'rootfs-base', rootfsBaseKey(i));
  const result = async () => ({ tree: path.join(dir, 'tree'), packages: JSON.parse(await readFile(path.join(dir, 'packages.json'), 'utf8')) as PackageVersion[] });
  if (await done(dir)) return result();
  const work = `${dir}.work`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const tree = path.join(work, 'tree');
  progress(`root: debootstrap ${SUITE} (minbase + ${ROOT_PACKAGES.join(', ')}) from ${i.mirror}; this takes a few minutes`);
  await runTool('debootstrap', ['--variant=minbase', `--include=${ROOT_PACKAGES.join(',')}`, SUITE, tree, i.mirror]);
  progress('root: adding the harness user with its sudo, no documentation, trimming caches');
  await runTool('chroot', [tree, 'groupadd', '-g', String(GUEST_USER.gid), GUEST_USER.name]);
  await runTool('chroot', [tree, 'useradd', '-m', '-u', String(GUEST_USER.uid), '-g', String(GUEST_USER.gid), '-s', '/bin/bash', '-d', GUEST_USER.home, GUEST_USER.name]);
  await configureWorkstation(tree, GUEST_USER.name, SUITE);
  const packages = parseDpkgQuery(await runTool('chroot', [tree, 'dpkg-query', ...DPKG_QUERY_ARGS]));
  if (!ROOT_PACKAGES.every((p) => packages.some((q) => q.name === p))) throw new Error('debootstrap left out a package it was asked for');
  await writeFile(path.join(work, 'packages.json'), JSON.stringify(packages));
  await writeFile(path.join(work, '.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(work, dir);
  return result();
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One build at a time in an image dir: two processes building the same steps would remove each
 * other's work (a server's build at its start and `agentvm image build`, side by side). A lock left
 * by a process that is gone is taken over.
 */
async function withBuildLock<T>(imageDir: string, progress: Progress, fn: () => Promise<T>): Promise<T> {
  const file = path.join(imageDir, 'build.lock');
  await mkdir(imageDir, { recursive: true });
  let told = false;
  for (;;) {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (!holder || !alive(holder)) {
      await rm(file, { force: true });
      continue;
    }
    if (!told) progress(`waiting for the build that process ${holder} is making in ${imageDir}`);
    told = true;
    await sleep(1000);
  }
  try {
    return await fn();
  } finally {
    await rm(file, { force: true });
  }
}

/**
 * Builds (or finds) the image of the current inputs. Needs root (debootstrap, chroot) and Debian's
 * debootstrap, cpio, busybox-static, lz4 and e2fsprogs.
 */
export async function buildImage(imageDir: string, progress: Progress = () => undefined): Promise<Image> {
  const i = await inputs();
  const id = imageIdOf(i);
  const existing = await loadImage(imageDir, id);
  if (existing) return existing;
  return withBuildLock(imageDir, progress, async () => (await loadImage(imageDir, id)) ?? build(imageDir, i, id, progress));
}

async function build(imageDir: string, i: Inputs, id: string, progress: Progress): Promise<Image> {
  const started = Date.now();
  progress(`building guest image ${id}`);
  const cacheDir = path.join(imageDir, 'cache');
  await mkdir(cacheDir, { recursive: true });
  const kernel = await buildKernel(cacheDir, i.kernel, progress);
  const base = await buildRootfsBase(cacheDir, i, progress);
  const npmRoot = await buildNpm(cacheDir, progress);
  const harnesses = await buildHarnesses(cacheDir, progress);

  const work = path.join(imageDir, `${id}.work`);
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  progress('root: adding the guest agent and making the ext4 image');
  const staging = path.join(work, 'root');
  await runTool('cp', ['-a', base.tree, staging]);
  await runTool('cp', ['-a', '--no-preserve=ownership', `${npmRoot}/.`, staging]);
  await mkdir(path.join(staging, 'opt/agentvm'), { recursive: true });
  await mkdir(path.join(staging, 'persist'), { recursive: true });
  // E2B's home is the workspace (made here, not by each sandbox: a restart resets the root to this).
  await rm(path.join(staging, E2B_HOME), { recursive: true, force: true });
  await symlink(WORKSPACE, path.join(staging, E2B_HOME));
  await writeFile(path.join(staging, 'opt/agentvm/agent.mjs'), i.agentBundle);
  await writeFile(path.join(staging, 'etc/agentvm-image'), `${id}\n`);
  for (const f of [...proxyFiles(EGRESS_GATEWAY_URL), ...loginFiles()]) {
    await writeFile(path.join(staging, f.path), f.text);
    await chmod(path.join(staging, f.path), f.mode);
  }
  for (const f of IDENTITY_FILES) {
    await rm(path.join(staging, 'etc', f), { force: true });
    await symlink(`${IDENTITY_DIR}/${f}`, path.join(staging, 'etc', f));
  }
  // The diagnostic harnesses, and the echo's counter on the root filesystem (the harness user writes it).
  for (const [n, program] of DIAGNOSTIC_PROGRAMS.entries()) {
    await writeFile(path.join(staging, 'usr/local/bin', program), i.diagnostics[n], { mode: 0o755 });
  }
  // Their awk (GUEST_AWK): a link to the static BusyBox, which takes its applet from the name.
  await mkdir(path.join(staging, path.dirname(GUEST_AWK)), { recursive: true });
  await symlink('/usr/bin/busybox', path.join(staging, GUEST_AWK));
  await mkdir(path.join(staging, 'var/lib/agentvm-echo'), { recursive: true });
  await chown(path.join(staging, 'var/lib/agentvm-echo'), GUEST_USER.uid, GUEST_USER.gid);
  // The harness programs, their trees and settings, over the root.
  await runTool('cp', ['-a', '--no-preserve=ownership', `${harnesses.root}/.`, staging]);
  await runTool('mkfs.ext4', ['-q', '-F', '-L', 'root', '-d', staging, path.join(work, 'rootfs.ext4'), ROOTFS_SIZE]);
  await rm(staging, { recursive: true, force: true });
  progress('initramfs: busybox, the virtio modules and our init');
  await buildInitramfs(kernel.dir, i.initScript, path.join(work, 'initramfs.cpio.gz'));
  await link(path.join(kernel.dir, 'vmlinux'), path.join(work, 'vmlinux')).catch(() => copyFile(path.join(kernel.dir, 'vmlinux'), path.join(work, 'vmlinux')));
  const files = await Promise.all(['rootfs.ext4', 'vmlinux', 'initramfs.cpio.gz'].map((f) => stat(path.join(work, f))));
  const manifest: ImageManifest = {
    id,
    kernel_package: i.kernel.name,
    kernel_version: i.kernel.version,
    kernel_release: kernel.release,
    suite: SUITE,
    packages: [...base.packages, { name: NPM_PACKAGE.name, version: NPM_PACKAGE.version }].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    built_at: new Date().toISOString(),
    rootfs_bytes: files[0].size,
    size_bytes: files.reduce((sum, f) => sum + f.blocks * 512, 0),
    build_ms: Date.now() - started,
    harnesses: { ...harnesses.installed, echo: ['agentvm-echo (in this repository)'], ticker: ['agentvm-ticker (in this repository)'] },
    unavailable: harnesses.unavailable,
  };
  await writeFile(path.join(work, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await rename(work, path.join(imageDir, id));
  progress(`guest image ${id} is ready`);
  return (await loadImage(imageDir, id))!;
}
