/**
 * What the image takes from the npm registry, each a tree cached under its own key and copied over
 * the root: npm itself, and the harness programs, pinned.
 */
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { geminiSettingsFiles } from '../harness/geminiSettings.ts';
import { BUILDER_VERSION, done, runTool, sha256, type Progress } from './step.ts';
import { installNpm, NPM_PACKAGE } from './workstation.ts';

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

/** The harness tree's cache key (an input of the image id too). */
export function harnessesKey(): string {
  return sha256(String(BUILDER_VERSION), JSON.stringify(HARNESS_PACKAGES)).slice(0, 16);
}

/** npm's tree's cache key (an input of the image id too). */
export function npmKey(): string {
  return sha256(String(BUILDER_VERSION), NPM_PACKAGE.name, NPM_PACKAGE.version).slice(0, 16);
}

/** npm, as a tree to copy over the root. */
export async function buildNpm(cacheDir: string, progress: Progress): Promise<string> {
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
export async function buildHarnesses(cacheDir: string, progress: Progress): Promise<{ root: string; installed: Record<string, string[]>; unavailable: Record<string, string> }> {
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
