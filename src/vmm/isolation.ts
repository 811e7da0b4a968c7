/**
 * What a QEMU may touch on its host. Started by a control plane running as root, every VM's QEMU runs
 * as a user of its own (AGENTVM_QEMU_UID_BASE + its network slot, its group the same number, no other
 * group), inside QEMU's seccomp sandbox (commandLine.ts), and can open only its own VM directory
 * (owned by that user, mode 0700): not the data dir's database, secrets key or admin token, not another
 * VM's disks. The shared files it needs are read-only to it: the image (kernel, initramfs, root
 * filesystem) and the blank disks its own disks are copy-on-write children of.
 *
 * A clone's RAM is its golden snapshot's memory mapped copy-on-write. QEMU 7.2 opens a memory file
 * for writing even to map it privately, so a clone never opens the snapshot's file: it gets a sealed
 * copy of it (a memfd no one can write, made once per file and shared by every clone), as descriptor
 * 3, and maps `/proc/self/fd/3`.
 *
 * A control plane that is not root cannot start a process as another user: its QEMUs run as itself,
 * sandboxed all the same (logged at start).
 */
import { spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, readdir, readlink, stat } from 'node:fs/promises';
import path from 'node:path';

/** The first uid (and gid) of QEMU users; a VM's is this plus its network slot. */
export const QEMU_UID_BASE = Number(process.env.AGENTVM_QEMU_UID_BASE ?? 1_900_000_000) || 1_900_000_000;
/** The slot number of golden machines' user: above every network slot (0..0x7fff). */
export const GOLDEN_SLOT = 0x8000;

export interface RunAs {
  uid: number;
  gid: number;
}

/** Whether QEMUs run as users of their own: only a control plane running as root can start them so. */
export function isolating(): boolean {
  return process.getuid?.() === 0 && process.env.AGENTVM_QEMU_SAME_USER !== '1';
}

/** The user a machine of network slot `slot` runs as; null when QEMUs run as this process's user. */
export function runAsOf(slot: number): RunAs | null {
  if (!isolating()) return null;
  const id = QEMU_UID_BASE + slot;
  return { uid: id, gid: id };
}

/**
 * Makes `dir` (a VM's, or a golden machine's while it is built) its QEMU's own: the directory and the
 * files in it belong to its user, mode 0700. Links are never followed (a file the QEMU replaced with a
 * link is not the host's to chown through).
 */
export async function giveDir(dir: string, who: RunAs | null): Promise<void> {
  if (!who) return;
  const real = await realDir(dir);
  // The directory it is in (the VMs', made 0700 with the first VM's) lets it pass, unlisted.
  const parent = await stat(path.dirname(real));
  if ((parent.mode & 0o011) !== 0o011) await chmod(path.dirname(real), (parent.mode & 0o7777) | 0o011);
  await chown(real, who.uid, who.gid);
  await chmod(real, 0o700);
  for (const name of await readdir(real)) {
    const p = path.join(real, name);
    const st = await lstat(p).catch(() => null);
    if (!st || st.isSymbolicLink()) continue;
    // Saved memory and its base stay the host's (the QEMU of a resume is given a sealed copy), and so
    // do the host's socket to the VM's gateway and the frozen layers a snapshot shares (branch.ts).
    if (/^(ram\.base|ram\.prefix|suspend\.(state|json)|egress\.sock|layer-[A-Za-z0-9_]+-(upper|persist)\.qcow2)$/.test(name)) continue;
    if (st.uid !== who.uid) await chown(p, who.uid, who.gid).catch(() => undefined);
  }
}

/** Takes a directory back from its QEMU (a golden machine's, once saved): root's, readable by root only. */
export async function takeDir(dir: string): Promise<void> {
  if (!isolating()) return;
  for (const name of await readdir(dir)) {
    const p = path.join(dir, name);
    const st = await lstat(p).catch(() => null);
    if (st && !st.isSymbolicLink()) await chown(p, 0, 0);
  }
  await chown(dir, 0, 0);
  await chmod(dir, 0o700);
}

async function realDir(dir: string): Promise<string> {
  const target = await readlink(dir).catch(() => null);
  return target ? path.resolve(path.dirname(dir), target) : dir;
}

/**
 * The data dir as QEMUs may pass through it: the folders above it searchable by anyone (answered: the
 * ones that were not), the dir itself and the entries in `through` traversable by anyone (0711: not
 * listable); every other entry (the database, the secrets key, the admin token, logs) loses its group
 * and other permissions.
 */
export async function openDataDirToMachines(dataDir: string, through: string[]): Promise<string[]> {
  if (!isolating()) return [];
  // Every folder above the data dir must let QEMU's users pass (search only, never list): a checkout under
  // root's 0700 home, or a test's 0700 temporary folder, would otherwise shut every VM out of its own folder.
  const opened: string[] = [];
  for (let dir = path.dirname(path.resolve(dataDir)); ; dir = path.dirname(dir)) {
    const st = await stat(dir);
    if (!(st.mode & 0o001)) {
      await chmod(dir, (st.mode & 0o7777) | 0o001);
      opened.push(dir);
    }
    if (path.dirname(dir) === dir) break;
  }
  await chmod(dataDir, 0o711);
  const keep = new Set(through.map((p) => path.relative(dataDir, p)).filter((r) => r && !r.startsWith('..') && !r.includes(path.sep)));
  // Made here when missing: a folder made later on the way to a VM's own (mkdir -p, mode 0700) would shut its QEMU out.
  for (const name of keep) await mkdir(path.join(dataDir, name), { recursive: true, mode: 0o711 });
  for (const name of await readdir(dataDir)) {
    const p = path.join(dataDir, name);
    const st = await lstat(p).catch(() => null);
    if (!st || st.isSymbolicLink()) continue;
    if (keep.has(name)) {
      if (st.isDirectory()) await chmod(p, (st.mode & 0o700) | 0o011);
    } else if (st.mode & 0o077) await chmod(p, st.mode & 0o700);
  }
  return opened;
}

/** The Perl that makes a sealed copy of a file (memfd_create, then F_ADD_SEALS), zero pages left as holes. */
const SEALED_COPY_PERL = String.raw`
use strict;
use Fcntl qw(O_RDONLY O_NOFOLLOW SEEK_SET);
# The descriptor's number must reach the host before this waits on STDIN: a pipe is block-buffered.
$| = 1;
my ($src, $name) = @ARGV;
sysopen(my $in, $src, O_RDONLY | O_NOFOLLOW) or die "$src: $!\n";
my @st = stat($in);
die "$src is not root's own file\n" if $st[4] != 0 || ! -f _;
my $fd = syscall(319, $name, 2);
die "memfd_create: $!\n" if $fd < 0;
open(my $m, '+<&=', $fd) or die "memfd: $!\n";
binmode $m;
truncate($m, $st[7]) or die "truncate: $!\n";
my ($buf, $at) = ('', 0);
while (my $n = sysread($in, $buf, 1 << 20)) {
  for (my $o = 0; $o < $n; $o += 4096) {
    my $page = substr($buf, $o, 4096);
    next unless $page =~ /[^\0]/;
    sysseek($m, $at + $o, SEEK_SET) or die "seek: $!\n";
    my $w = syswrite($m, $page);
    die "write: $!\n" unless defined $w && $w == length($page);
  }
  $at += $n;
}
fcntl($m, 1033, 15) or die "seal: $!\n";
print "$fd\n";
<STDIN>;
`;

/** The memfd name of a sealed copy names its file, so a save knows what a QEMU's RAM maps. */
const MEMFD_PREFIX = 'agentvm:';

const sealed = new Map<string, Promise<{ fd: number; ino: number }>>();

/**
 * A sealed copy of the memory file `file` (root's own: links are not followed), as a descriptor of
 * this process: made once per file (its device and inode), shared by every QEMU given it.
 */
export async function sealedCopy(file: string): Promise<number> {
  const st = await stat(file);
  const key = `${st.dev}:${st.ino}`;
  let p = sealed.get(key);
  if (!p) {
    p = makeSealedCopy(file);
    sealed.set(key, p);
    p.catch(() => sealed.delete(key));
  }
  return (await p).fd;
}

function makeSealedCopy(file: string): Promise<{ fd: number; ino: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('perl', ['-e', SEALED_COPY_PERL, file, `${MEMFD_PREFIX}${path.resolve(file)}`.slice(0, 249)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^(\d+)\n/.exec(out);
      if (!m) return;
      try {
        const fd = openSync(`/proc/${child.pid}/fd/${m[1]}`, 'r');
        resolve({ fd, ino: fstatSync(fd).ino });
      } catch (e) {
        reject(e as Error);
      }
      child.stdin.end();
    });
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => reject(new Error(`making a sealed copy of ${file} failed (${code}): ${err.trim()}`)));
  });
}

/** Drops the sealed copies this process holds (its QEMUs keep theirs). */
export async function dropSealedCopies(): Promise<void> {
  for (const p of sealed.values()) await p.then(({ fd }) => closeSync(fd), () => undefined);
  sealed.clear();
}

/**
 * What a QEMU's RAM (descriptor 3, a sealed copy) maps: the file it was copied from and the inode its
 * mapping shows in /proc/PID/maps; null when descriptor 3 is not a sealed copy.
 */
export async function sealedSource(pid: number): Promise<{ file: string; ino: number } | null> {
  const link = await readlink(`/proc/${pid}/fd/3`).catch(() => '');
  const m = /^\/memfd:agentvm:(.*) \(deleted\)$/.exec(link);
  if (!m) return null;
  const ino = await stat(`/proc/${pid}/fd/3`).then((s) => s.ino, () => null);
  return ino === null ? null : { file: m[1], ino };
}
