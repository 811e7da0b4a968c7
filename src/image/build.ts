/**
 * The guest image pipeline: Debian's cloud kernel unpacked from its package, an initramfs of our own
 * that loads the virtio modules, a Debian 13 root made by debootstrap holding a workstation's
 * toolchain (workstation.ts), the guest agent and the harness programs, and an ext4 base image. Everything is content-addressed under the image
 * dir: an image's id is a hash of every input, so nothing is rebuilt unless an input changed, and
 * finished steps are kept.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, chown, copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGunzip, createGzip } from 'node:zlib';
import { build as esbuild } from 'esbuild';
import { geminiSettingsFiles } from '../harness/geminiSettings.ts';
import { EGRESS_GATEWAY_URL, GUEST_AWK } from '../wire/protocol.ts';
import { configureWorkstation, DPKG_QUERY_ARGS, installNpm, NPM_PACKAGE, parseDpkgQuery, proxyFiles, ROOT_PACKAGES, workstationInputs, type PackageVersion } from './workstation.ts';

/** Bump when the way an image is put together changes, so that every image is rebuilt. */
const BUILDER_VERSION = 5;
/** Debian 13: its Node 20 runs gemini-cli, which Debian 12's Node 18 cannot. */
const SUITE = 'trixie';
/**
 * The kernel comes from the build host's apt (Debian 12's cloud kernel, 6.1, on these hosts): it is
 * resolved before anything is built, and trixie's userland runs on it.
 */
const KERNEL_META_PACKAGE = 'linux-image-cloud-amd64';
/** Loaded by the initramfs, dependencies first (the builder also reads each module's own `depends=`). */
const GUEST_MODULES = [
  'virtio_ring', 'virtio', 'virtio_mmio', 'virtio_blk', 'virtio_console', 'failover', 'net_failover', 'virtio_net', 'virtio-rng',
  // A VM's own disks are SCSI disks (plugged into a resumed clone); its root is an overlay.
  'virtio_scsi', 'sd_mod', 'overlay',
  // Sockets can be ended from outside (`ss -K`, with the kernel's INET_DIAG_DESTROY): a resumed guest's
  // assume program ends its connections through the gateway, which did not survive the suspend.
  'tcp_diag',
];
const ROOTFS_SIZE = '4G';

/** Where a harness that is a Node program keeps its npm tree in the image. */
const HARNESS_LIB = '/usr/local/lib/agentvm-harnesses';

/**
 * A harness program put into the image, pinned, from the npm registry. Either native builds for
 * Linux x86-64 shipped inside platform packages (`programs`: the image takes the program itself, not
 * Node glue), or a Node program (`node`: its npm tree under HARNESS_LIB and a launcher that runs it
 * with the guest's Node), with the files it needs in the image (`files`: path → contents).
 */
interface HarnessPackage {
  id: string;
  packages: string[];
  programs?: Record<string, string>;
  node?: { package: string; bin: string; env: Record<string, string> };
  files?: Record<string, string>;
}

const HARNESS_PACKAGES: HarnessPackage[] = [
  {
    id: 'claude-code',
    packages: ['@anthropic-ai/claude-code@2.1.330', '@anthropic-ai/claude-code-linux-x64@2.1.330'],
    programs: { claude: '@anthropic-ai/claude-code-linux-x64/claude' },
  },
  {
    id: 'codex',
    packages: ['@openai/codex@0.169.0'],
    programs: {
      codex: '@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex',
      // Without it codex offers the model no tools ("code mode fails closed").
      'codex-code-mode-host': '@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex-code-mode-host',
      rg: '@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-path/rg',
    },
  },
  {
    id: 'opencode',
    packages: ['opencode-ai@1.18.33'],
    programs: { opencode: 'opencode-linux-x64/bin/opencode' },
  },
  {
    id: 'gemini-cli',
    packages: ['@google/gemini-cli@0.61.0'],
    // Its own start would spawn a second Node with a larger heap: a Node start costs seconds under emulation.
    node: { package: '@google/gemini-cli', bin: 'gemini', env: { GEMINI_CLI_NO_RELAUNCH: 'true' } },
    files: geminiSettingsFiles(),
  },
];
/** Harnesses this image cannot carry, and why (listed in the manifest). */
const UNINSTALLABLE: Record<string, string> = {
  aider: 'a Python package, and the Python package index is not reachable from the image build',
};
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

export type Progress = (message: string) => void;

interface Inputs {
  kernelPackage: string;
  kernelVersion: string;
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

function sha256(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
}

/** Runs a program (never a shell) and answers its stdout; a failure carries the tail of stderr. */
function runTool(cmd: string, args: string[], opts: { cwd?: string; input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', DEBIAN_FRONTEND: 'noninteractive' } });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    child.on('error', (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`${cmd} ${args.join(' ')} failed (${code}): ${err.trim()}`)),
    );
    // A program that reads no input may be gone before its (empty) stdin is closed.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

async function resolveKernelPackage(): Promise<{ name: string; version: string }> {
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
  return { kernelPackage: kernel.name, kernelVersion: kernel.version, mirror, agentBundle, initScript, diagnostics };
}

function rootfsBaseKey(i: Inputs): string {
  return sha256(String(BUILDER_VERSION), SUITE, i.mirror, workstationInputs(GUEST_USER.name, SUITE), JSON.stringify(GUEST_USER)).slice(0, 16);
}

function harnessesKey(): string {
  return sha256(String(BUILDER_VERSION), JSON.stringify(HARNESS_PACKAGES)).slice(0, 16);
}

function npmKey(): string {
  return sha256(String(BUILDER_VERSION), NPM_PACKAGE.name, NPM_PACKAGE.version).slice(0, 16);
}

function imageIdOf(i: Inputs): string {
  return sha256(String(BUILDER_VERSION), harnessesKey(), npmKey(), i.kernelPackage, i.kernelVersion, rootfsBaseKey(i), i.agentBundle, i.initScript, ...i.diagnostics, GUEST_MODULES.join(','), ROOTFS_SIZE, `${IDENTITY_DIR}:${IDENTITY_FILES.join(',')}`, GUEST_AWK, JSON.stringify(proxyFiles(EGRESS_GATEWAY_URL))).slice(0, 20);
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

async function done(dir: string): Promise<boolean> {
  return existsSync(path.join(dir, '.complete'));
}

async function buildKernel(cacheDir: string, i: Inputs, progress: Progress): Promise<{ dir: string; release: string }> {
  const dir = path.join(cacheDir, 'kernel', `${i.kernelPackage}_${i.kernelVersion}_${sha256(GUEST_MODULES.join(',')).slice(0, 8)}`);
  if (await done(dir)) return { dir, release: (await readFile(path.join(dir, 'release'), 'utf8')).trim() };
  progress(`kernel: downloading ${i.kernelPackage} ${i.kernelVersion}`);
  const work = `${dir}.work`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  await chmod(work, 0o777); // apt's download user writes here
  await runTool('apt-get', ['download', '-q', `${i.kernelPackage}=${i.kernelVersion}`], { cwd: work });
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
    if (!file) throw new Error(`kernel module ${name} is not in ${i.kernelPackage}`);
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

/** npm, as a tree to copy over the root. */
async function buildNpm(cacheDir: string, progress: Progress): Promise<string> {
  const dir = path.join(cacheDir, 'npm', npmKey());
  if (await done(dir)) return path.join(dir, 'root');
  progress(`npm: ${NPM_PACKAGE.name}@${NPM_PACKAGE.version} from the npm registry`);
  const work = `${dir}.work`;
  await rm(work, { recursive: true, force: true });
  await installNpm(path.join(work, 'root'), (cmd, args) => runTool(cmd, args));
  await runTool('chmod', ['-R', 'u+rwX,go+rX,go-w', path.join(work, 'root')]);
  await writeFile(path.join(work, '.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(work, dir);
  return path.join(dir, 'root');
}

/** A shell launcher that runs a Node program's entry with the guest's Node. */
function nodeLauncher(spec: string, entry: string, env: Record<string, string>): string {
  const vars = Object.entries(env).map(([k, v]) => {
    if (!/^[A-Z_][A-Z0-9_]*$/.test(k) || !/^[A-Za-z0-9_./:-]*$/.test(v)) throw new Error(`launcher variable ${k} is not plain`);
    return `export ${k}=${v}\n`;
  });
  return `#!/bin/sh\n# ${spec} from the npm registry, run by the guest's Node (made by the agentvm image builder).\n${vars.join('')}exec /usr/bin/node ${entry} "$@"\n`;
}

/** The program file a package's `bin` names, relative to the package. */
async function packageBin(packageDir: string, name: string): Promise<string> {
  const pkg = JSON.parse(await readFile(path.join(packageDir, 'package.json'), 'utf8')) as { name: string; bin?: string | Record<string, string> };
  const rel = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin?.[name];
  if (!rel) throw new Error(`${pkg.name} has no bin named ${name}`);
  if (!existsSync(path.join(packageDir, rel))) throw new Error(`${pkg.name}: its bin ${rel} is missing`);
  return path.posix.normalize(rel);
}

/**
 * The harness programs, from the npm registry (install scripts off: native programs are plain files
 * in the platform packages, and a Node program's tree needs no build), laid out as a tree to copy
 * over the image's root. A harness that cannot be fetched is left out and named in `unavailable`.
 */
async function buildHarnesses(cacheDir: string, progress: Progress): Promise<{ root: string; installed: Record<string, string[]>; unavailable: Record<string, string> }> {
  const dir = path.join(cacheDir, 'harnesses', harnessesKey());
  if (await done(dir)) return JSON.parse(await readFile(path.join(dir, 'result.json'), 'utf8'));
  const work = `${dir}.work`;
  const root = path.join(work, 'root');
  const bin = path.join(root, 'usr/local/bin');
  await rm(work, { recursive: true, force: true });
  await mkdir(bin, { recursive: true });
  const installed: Record<string, string[]> = {};
  const unavailable: Record<string, string> = { ...UNINSTALLABLE };
  for (const h of HARNESS_PACKAGES) {
    progress(`harnesses: ${h.id} (${h.packages.join(', ')})`);
    // A Node program's tree stays where the image keeps it; native programs are taken out of theirs.
    const prefix = h.node ? path.join(root, HARNESS_LIB, h.id) : path.join(work, 'npm', h.id);
    const written: string[] = [];
    try {
      await mkdir(prefix, { recursive: true });
      await runTool('npm', ['install', '--prefix', prefix, '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--no-save', ...h.packages]);
      for (const [program, rel] of Object.entries(h.programs ?? {})) {
        written.push(path.join(bin, program));
        await copyFile(path.join(prefix, 'node_modules', rel), path.join(bin, program));
        await chmod(path.join(bin, program), 0o755);
      }
      if (h.node) {
        const packageDir = path.join(prefix, 'node_modules', h.node.package);
        const entry = path.posix.join(HARNESS_LIB, h.id, 'node_modules', h.node.package, await packageBin(packageDir, h.node.bin));
        written.push(path.join(bin, h.node.bin));
        await writeFile(path.join(bin, h.node.bin), nodeLauncher(h.packages.join(' '), entry, h.node.env), { mode: 0o755 });
      }
      for (const [file, contents] of Object.entries(h.files ?? {})) {
        written.push(path.join(root, file));
        await mkdir(path.dirname(path.join(root, file)), { recursive: true });
        await writeFile(path.join(root, file), contents, { mode: 0o644 });
      }
      installed[h.id] = h.packages;
    } catch (err) {
      unavailable[h.id] = `could not be fetched: ${(err as Error).message.split('\n')[0].slice(0, 200)}`;
      progress(`harnesses: ${h.id} is unavailable: ${unavailable[h.id]}`);
      for (const f of written) await rm(f, { force: true });
      if (h.node) await rm(prefix, { recursive: true, force: true });
    }
    if (!h.node) await rm(prefix, { recursive: true, force: true });
  }
  await rm(path.join(work, 'npm'), { recursive: true, force: true });
  // Readable by the harness user whatever the umask of the build.
  await runTool('chmod', ['-R', 'u+rwX,go+rX,go-w', root]);
  const result = { root: path.join(dir, 'root'), installed, unavailable };
  await writeFile(path.join(work, 'result.json'), JSON.stringify(result));
  await writeFile(path.join(work, '.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(work, dir);
  return result;
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

async function buildInitramfs(kernelDir: string, initScript: string, out: string): Promise<void> {
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
  const kernel = await buildKernel(cacheDir, i, progress);
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
  await writeFile(path.join(staging, 'opt/agentvm/agent.mjs'), i.agentBundle);
  await writeFile(path.join(staging, 'etc/agentvm-image'), `${id}\n`);
  for (const f of proxyFiles(EGRESS_GATEWAY_URL)) {
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
    kernel_package: i.kernelPackage,
    kernel_version: i.kernelVersion,
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
