/**
 * What makes the guest root a coding workstation: the Debian packages beyond what the guest itself
 * needs, npm from the npm registry, the harness user's passwordless sudo, apt pointed at Debian's
 * public mirrors, and no documentation (dpkg's path excludes, so packages a VM installs later bring
 * none either). The package manifest of a root is read here too.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** What the guest itself runs on: the agent (Node), its network and disks, the initramfs's BusyBox. */
const GUEST_PACKAGES = ['nodejs', 'iproute2', 'e2fsprogs', 'ca-certificates', 'procps', 'util-linux', 'busybox-static'];

/** The toolchain every VM has (decisions §15). build-essential brings gcc, g++, make and libc6-dev. */
export const TOOLCHAIN_PACKAGES = [
  'git', 'curl', 'wget', 'openssh-client', 'gnupg', 'sudo', 'build-essential', 'pkg-config',
  'python3', 'python3-pip', 'python3-venv', 'python-is-python3', 'jq', 'ripgrep', 'fd-find',
  'unzip', 'zip', 'xz-utils', 'less', 'vim-tiny', 'nano',
];

/** Everything debootstrap includes beyond its minbase variant. */
export const ROOT_PACKAGES = [...GUEST_PACKAGES, ...TOOLCHAIN_PACKAGES];

/**
 * npm, from the npm registry rather than Debian's package (which brings some 300 node-* packages
 * of its own): the line that goes with Node 20, pinned.
 */
export const NPM_PACKAGE = { name: 'npm', version: '10.9.9' };

/** The Debian packages of an image's manifest: all but its npm (from the npm registry, not Debian's). */
export function debianPackages(m: { packages: PackageVersion[] }): PackageVersion[] {
  return m.packages.filter((p) => p.name !== NPM_PACKAGE.name);
}

/**
 * No documentation, manual pages, info pages or message catalogues but English ones; copyright
 * files stay. Written before anything is trimmed, and kept in the image, so an `apt-get install` in
 * a VM leaves them out too.
 */
const DPKG_EXCLUDES = `# agentvm: a VM's root carries no documentation (the image builder wrote this).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-include /usr/share/locale/en*
`;

/** The harness user's sudo: the VM is the boundary (as on every peer platform), so no password. */
const SUDOERS = (user: string) => `# agentvm: ${user} administers its own VM (the image builder wrote this).\n${user} ALL=(ALL:ALL) NOPASSWD: ALL\n`;

/**
 * apt in a VM asks Debian's public mirrors (the `@debian` egress preset's hosts), whatever mirror
 * the image was built from. Package lists are not in the image: `sudo apt-get update` first.
 */
const APT_SOURCES = (suite: string) => `Types: deb
URIs: http://deb.debian.org/debian
Suites: ${suite} ${suite}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.debian.org/debian-security
Suites: ${suite}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`;

/**
 * The egress gateway as every program's proxy, also through `sudo` (which otherwise drops the proxy
 * variables a run has, so `sudo apt-get update` could reach nothing) and for apt whatever its
 * environment (`sudo -i`, a login shell, an image build's step). Written at the image's last stage.
 */
export function proxyFiles(gatewayUrl: string): Array<{ path: string; text: string; mode: number }> {
  const vars = 'http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY NODE_USE_ENV_PROXY';
  return [
    { path: 'etc/sudoers.d/agentvm-proxy', text: `# agentvm: sudo keeps the egress gateway as the proxy (the image builder wrote this).\nDefaults env_keep += "${vars}"\n`, mode: 0o440 },
    { path: 'etc/apt/apt.conf.d/80agentvm-proxy', text: `// agentvm: apt reaches Debian through the VM's egress gateway (the image builder wrote this).\nAcquire::http::Proxy "${gatewayUrl}/";\nAcquire::https::Proxy "${gatewayUrl}/";\n`, mode: 0o644 },
  ];
}

/**
 * /etc/profile for login shells (E2B's SDK runs every command as `bash -l -c`; the console's shells are
 * logins): Debian's, but with no program started by the profile itself. Debian's runs `id -u` and
 * `run-parts` for each login, which under emulation cost about 100 ms of a 215 ms `bash -l -c true`.
 * bash knows its uid (EUID); sh (dash) asks `id`; profile.d's scripts are found by a glob.
 */
export const LOGIN_PROFILE = `# /etc/profile: for login shells (sh, bash). agentvm's (the image builder wrote it): Debian's,
# without a program started for each login.
_avm_uid=\${EUID:-\$(id -u)}
if [ "\$_avm_uid" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH

if [ "\${PS1-}" ]; then
  if [ "\${BASH-}" ] && [ "\$BASH" != "/bin/sh" ]; then
    if [ -f /etc/bash.bashrc ]; then
      . /etc/bash.bashrc
    fi
  else
    if [ "\$_avm_uid" -eq 0 ]; then
      PS1='# '
    else
      PS1='\$ '
    fi
  fi
fi
unset _avm_uid

for i in /etc/profile.d/*.sh; do
  if [ -r "\$i" ]; then
    . "\$i"
  fi
done
unset i
`;

/**
 * Files of the image's last stage beside the proxy's: the login profile, and apt told to keep a changed
 * configuration file (as that profile, a conffile of base-files) without asking, as an unattended
 * upgrade or an image build's `RUN apt-get upgrade` must.
 */
export function loginFiles(): Array<{ path: string; text: string; mode: number }> {
  return [
    { path: 'etc/profile', text: LOGIN_PROFILE, mode: 0o644 },
    { path: 'etc/apt/apt.conf.d/81agentvm-conffiles', text: '// agentvm: keep changed configuration files without asking (the image builder wrote this).\nDpkg::Options { "--force-confdef"; "--force-confold"; };\n', mode: 0o644 },
  ];
}

/** The text of everything this module writes into a root: part of the root's cache key. */
export function workstationInputs(user: string, suite: string): string {
  return [ROOT_PACKAGES.join(','), DPKG_EXCLUDES, SUDOERS(user), APT_SOURCES(suite), TRIM.join(',')].join('\0');
}

/** Trimmed after the packages are in: what dpkg's excludes keep out of later installs, and apt's caches. */
const TRIM = ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/groff', 'usr/share/lintian', 'usr/share/linda', 'usr/share/locale', 'var/cache/apt', 'var/lib/apt/lists'];
/** What the trim leaves of those directories (dpkg's path-include lines, and apt's own locks). */
function kept(dir: string, name: string): boolean {
  if (dir === 'usr/share/locale') return name === 'locale.alias' || name.startsWith('en');
  return name === 'partial' || name === 'lock';
}

/** Makes a debootstrapped root a workstation: configuration, then the trim. Runs as root on the build host. */
export async function configureWorkstation(tree: string, user: string, suite: string): Promise<void> {
  await mkdir(path.join(tree, 'etc/dpkg/dpkg.cfg.d'), { recursive: true });
  await writeFile(path.join(tree, 'etc/dpkg/dpkg.cfg.d/agentvm-nodoc'), DPKG_EXCLUDES, { mode: 0o644 });
  // sudo reads no file of sudoers.d that is writable by anyone but root: 0440, as visudo makes them.
  await writeFile(path.join(tree, 'etc/sudoers.d/agentvm-agent'), SUDOERS(user));
  await chmod(path.join(tree, 'etc/sudoers.d/agentvm-agent'), 0o440);
  await rm(path.join(tree, 'etc/apt/sources.list'), { force: true });
  await mkdir(path.join(tree, 'etc/apt/sources.list.d'), { recursive: true });
  await writeFile(path.join(tree, 'etc/apt/sources.list.d/debian.sources'), APT_SOURCES(suite), { mode: 0o644 });
  // Debian names fd `fdfind` (another package had `fd`); a VM's user expects `fd`.
  if (!existsSync(path.join(tree, 'usr/local/bin/fd'))) await symlink('/usr/bin/fdfind', path.join(tree, 'usr/local/bin/fd'));
  for (const sub of TRIM) await trimDir(tree, sub);
}

async function trimDir(tree: string, sub: string): Promise<void> {
  for (const f of await readdir(path.join(tree, sub)).catch(() => [] as string[])) {
    const full = path.join(tree, sub, f);
    if (kept(sub, f)) continue;
    if (sub === 'usr/share/doc') {
      // Each package's directory keeps its copyright file alone.
      for (const g of await readdir(full).catch(() => [] as string[])) if (g !== 'copyright') await rm(path.join(full, g), { recursive: true, force: true });
      continue;
    }
    await rm(full, { recursive: true, force: true });
  }
}

export interface PackageVersion {
  name: string;
  version: string;
}

/** `dpkg-query -W` output of the root (`${db:Status-Status} ${Package} ${Version}`): its installed packages by name. */
export function parseDpkgQuery(text: string): PackageVersion[] {
  const out: PackageVersion[] = [];
  for (const line of text.split('\n')) {
    const [status, name, version] = line.trim().split(/\s+/);
    if (status === 'installed' && name && version) out.push({ name, version });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export const DPKG_QUERY_ARGS = ['-W', '-f', '${db:Status-Status} ${Package} ${Version}\n'];

/**
 * npm as Node's own tarballs lay it out (/usr/local/lib/node_modules/npm, `npm` and `npx` linked in
 * /usr/local/bin), in a tree to copy over the root; install scripts off (npm has none to run).
 */
export async function installNpm(root: string, run: (cmd: string, args: string[]) => Promise<string>): Promise<void> {
  const prefix = path.join(root, 'usr/local');
  await mkdir(prefix, { recursive: true });
  await run('npm', ['install', '--global', '--prefix', prefix, '--ignore-scripts', '--no-audit', '--no-fund', `${NPM_PACKAGE.name}@${NPM_PACKAGE.version}`]);
  for (const program of ['npm', 'npx']) {
    if (!existsSync(path.join(prefix, 'bin', program))) throw new Error(`npm ${NPM_PACKAGE.version} installed no ${program}`);
  }
}
