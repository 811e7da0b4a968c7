/**
 * Stand-ins for the hosts a workstation's tools reach, on one loopback HTTP server on port 80 that
 * answers by the request's host (a VM's proxied request names it): a tiny Debian archive for
 * deb.debian.org and security.debian.org (made with dpkg-deb and dpkg-scanpackages, its InRelease
 * files signed with a key of the stand-in's, which takes the place of Debian's archive key), an npm
 * registry for registry.npmjs.org (a packument and its tarball), and a git repository for github.com
 * over git's dumb HTTP protocol (the files of a bare repository). Needs port 80: run inside a
 * network namespace of the test's own (test/netns.ts).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';

export interface RegistryStandins {
  /** The stand-in archive's public key (binary keyring), in place of Debian's. */
  debianKeyring: Buffer;
  /** Every request, as `host path`, in arrival order. */
  seen: string[];
  /** Answers of github.com/<path> the test sets (a build's step waits on one). */
  answers: Map<string, string>;
  close(): Promise<void>;
}

export interface RegistryFiles {
  /** A Debian package: its name, version and files (path → text). */
  deb: { name: string; version: string; description: string; files: Record<string, string> };
  /** An npm package: its name, version and files under package/. */
  npm: { name: string; version: string; files: Record<string, string> };
  /** A repository served as github.com/<repo>.git: its files, committed once. */
  git: { repo: string; files: Record<string, string>; message: string };
}

const run = (cmd: string, args: string[], cwd?: string, env?: NodeJS.ProcessEnv) => execFileSync(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
const sha = (alg: string, b: Buffer, enc: 'hex' | 'base64' = 'hex') => createHash(alg).update(b).digest(enc);

async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [p, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, p)), { recursive: true });
    await writeFile(path.join(root, p), text);
  }
}

/** A signed Debian archive under dir/archive (debian/ and debian-security/); answers its key. */
async function debianArchive(dir: string, deb: RegistryFiles['deb']): Promise<Buffer> {
  const pkg = path.join(dir, 'pkg');
  await writeTree(pkg, deb.files);
  await writeTree(pkg, {
    'DEBIAN/control': `Package: ${deb.name}\nVersion: ${deb.version}\nArchitecture: all\nMaintainer: agentvm tests <tests@example.com>\nDepends: python3\nDescription: ${deb.description}\n`,
  });
  const archive = path.join(dir, 'archive');
  const pool = path.join(archive, 'debian/pool/main');
  await mkdir(pool, { recursive: true });
  run('dpkg-deb', ['--build', '--root-owner-group', pkg, path.join(pool, `${deb.name}_${deb.version}_all.deb`)]);
  const gnupg = path.join(dir, 'gnupg');
  await mkdir(gnupg, { recursive: true, mode: 0o700 });
  const gpg = (args: string[], cwd?: string) => run('gpg', ['--homedir', gnupg, '--batch', '--yes', '--pinentry-mode', 'loopback', '--passphrase', '', ...args], cwd);
  gpg(['--quick-gen-key', 'agentvm stand-in archive <archive@example.com>', 'ed25519', 'sign', '0']);
  const suites: Array<[string, string, boolean]> = [
    ['debian', 'trixie', true],
    ['debian', 'trixie-updates', false],
    ['debian-security', 'trixie-security', false],
  ];
  for (const [root, suite, withPackage] of suites) {
    const dists = path.join(archive, root, 'dists', suite);
    await mkdir(path.join(dists, 'main/binary-amd64'), { recursive: true });
    const packages = withPackage ? run('dpkg-scanpackages', ['--multiversion', 'pool', '/dev/null'], path.join(archive, root)) : Buffer.alloc(0);
    await writeFile(path.join(dists, 'main/binary-amd64/Packages'), packages);
    const date = new Date(Date.now() - 60_000).toUTCString().replace('GMT', 'UTC');
    const release =
      `Origin: Debian\nLabel: Debian\nSuite: ${suite}\nCodename: ${suite}\nDate: ${date}\nArchitectures: amd64\nComponents: main\n` +
      `SHA256:\n ${sha('sha256', packages)} ${packages.length} main/binary-amd64/Packages\n`;
    await writeFile(path.join(dists, 'Release'), release);
    gpg(['--digest-algo', 'SHA512', '--clearsign', '-o', 'InRelease', 'Release'], dists);
  }
  return run('gpg', ['--homedir', gnupg, '--export']);
}

/** The npm package's tarball and packument under dir/npm. */
async function npmPackage(dir: string, p: RegistryFiles['npm']): Promise<{ packument: object; tarball: Buffer }> {
  const root = path.join(dir, 'npm');
  await writeTree(path.join(root, 'package'), { 'package.json': JSON.stringify({ name: p.name, version: p.version, main: 'index.js' }), ...p.files });
  run('tar', ['czf', 'package.tgz', '--owner=0', '--group=0', 'package'], root);
  const tarball = await readFile(path.join(root, 'package.tgz'));
  const version = {
    name: p.name,
    version: p.version,
    main: 'index.js',
    dist: {
      tarball: `http://registry.npmjs.org/${p.name}/-/${p.name}-${p.version}.tgz`,
      shasum: sha('sha1', tarball),
      integrity: `sha512-${sha('sha512', tarball, 'base64')}`,
    },
  };
  return { packument: { name: p.name, 'dist-tags': { latest: p.version }, versions: { [p.version]: version } }, tarball };
}

/** A bare repository of one commit under dir/git, ready for the dumb protocol. */
async function gitRepository(dir: string, g: RegistryFiles['git']): Promise<string> {
  const work = path.join(dir, 'git-work');
  await writeTree(work, g.files);
  const id = { GIT_AUTHOR_NAME: 'Team', GIT_AUTHOR_EMAIL: 'team@example.com', GIT_COMMITTER_NAME: 'Team', GIT_COMMITTER_EMAIL: 'team@example.com' };
  run('git', ['init', '-q', '-b', 'main'], work);
  run('git', ['add', '-A'], work);
  run('git', ['commit', '-q', '-m', g.message], work, id);
  const bare = path.join(dir, 'git', `${g.repo}.git`);
  await mkdir(path.dirname(bare), { recursive: true });
  run('git', ['clone', '-q', '--bare', work, bare]);
  run('git', ['update-server-info'], bare);
  return path.join(dir, 'git');
}

/** Makes the three and serves them on 127.0.0.1:80. */
export async function startRegistryStandins(dir: string, files: RegistryFiles): Promise<RegistryStandins> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const debianKeyring = await debianArchive(dir, files.deb);
  const npm = await npmPackage(dir, files.npm);
  const gitRoot = await gitRepository(dir, files.git);
  const seen: string[] = [];
  const answers = new Map<string, string>();
  /** A file under `root` named by the URL's path, or null (no `..`, files only). */
  const fileUnder = (root: string, p: string): string | null => {
    const full = path.join(root, path.normalize(decodeURIComponent(p)).replace(/^(\.\.(\/|$))+/, ''));
    return full.startsWith(root) && existsSync(full) && statSync(full).isFile() ? full : null;
  };
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const host = (req.headers.host ?? url.host).replace(/:\d+$/, '');
    seen.push(`${host} ${url.pathname}`);
    const send = (status: number, body: Buffer | string, type = 'application/octet-stream') => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    let file: string | null = null;
    if (host === 'deb.debian.org' || host === 'security.debian.org') file = fileUnder(path.join(dir, 'archive'), url.pathname);
    else if (host === 'registry.npmjs.org') {
      const name = files.npm.name;
      if (url.pathname === `/${name}`) return send(200, JSON.stringify(npm.packument), 'application/json');
      if (url.pathname === `/${name}/-/${name}-${files.npm.version}.tgz`) return send(200, npm.tarball);
    } else if (host === 'github.com') {
      if (answers.has(url.pathname)) return send(200, answers.get(url.pathname)!, 'text/plain');
      file = fileUnder(gitRoot, url.pathname);
    }
    if (!file) return send(404, 'not found\n', 'text/plain');
    send(200, await readFile(file));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(80, '127.0.0.1', resolve);
  });
  return {
    debianKeyring,
    seen,
    answers,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
