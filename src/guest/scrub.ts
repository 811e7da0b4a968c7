/**
 * Secret scrubbing of a captured persist disk, run inside a short-lived microVM that has the copy as
 * its persist disk (never on the host). Removes credential files and redacts key-shaped strings in
 * text files, then trims the filesystem so that freed blocks leave the image.
 */
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import type { ScrubReport } from '../wire/protocol.ts';

/** Files removed wherever they are, by name. */
const REMOVE_NAMES = new Set([
  '.git-credentials',
  '.bash_history',
  '.zsh_history',
  '.sh_history',
  '.python_history',
  '.node_repl_history',
  '.psql_history',
  '.mysql_history',
  '.lesshst',
  '.netrc',
  '.pgpass',
  '.npmrc', // holds registry tokens
  '.pypirc',
  'secrets.json', // the platform's harness credentials file, under .agentvm
]);

/** Files removed by their path under a home directory (credential stores of harnesses and cloud CLIs). */
const REMOVE_PATHS = [
  '.claude/.credentials.json',
  '.claude.json',
  '.codex/auth.json',
  '.gemini/oauth_creds.json',
  '.gemini/google_accounts.json',
  '.config/gemini/credentials.json',
  '.local/share/opencode/auth.json',
  '.aider.conf.yml',
  '.aws/credentials',
  '.aws/config',
  '.config/gcloud/credentials.db',
  '.config/gcloud/access_tokens.db',
  '.config/gcloud/application_default_credentials.json',
  '.config/gcloud/legacy_credentials',
  '.azure/accessTokens.json',
  '.azure/msal_token_cache.json',
  '.azure/msal_token_cache.bin',
  '.docker/config.json',
  '.kube/config',
  '.config/gh/hosts.yml',
];

/** Strings shaped like well-known API keys and tokens. */
const KEY_PATTERNS: RegExp[] = [
  /sk-ant-[A-Za-z0-9_-]{20,}/g, // Anthropic
  /sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}/g, // OpenAI
  /AIza[0-9A-Za-z_-]{35}/g, // Google
  /AKIA[0-9A-Z]{16}/g, // AWS access key id
  /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?=\s*$)/gm, // an AWS secret access key alone at the end of a line
  /gh[pousr]_[A-Za-z0-9]{36,}/g, // GitHub
  /github_pat_[A-Za-z0-9_]{60,}/g,
  /glpat-[A-Za-z0-9_-]{20,}/g, // GitLab
  /xox[abprs]-[A-Za-z0-9-]{10,}/g, // Slack
  /hf_[A-Za-z0-9]{30,}/g, // Hugging Face
  /sk_live_[A-Za-z0-9]{20,}/g, // Stripe
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
];

const MAX_TEXT_BYTES = 2 * 1024 * 1024;

function isEnvFile(name: string): boolean {
  return (name === '.env' || name.startsWith('.env.')) && !/\.(example|sample|template)$/.test(name);
}

async function isPrivateKeyFile(file: string, name: string): Promise<boolean> {
  if (/^id_[a-z0-9_]+$/.test(name)) return true;
  if (!/\.(pem|key|p12|pfx)$/.test(name)) return false;
  const fh = await fsp.open(file, 'r').catch(() => null);
  if (!fh) return false;
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(4096), 0, 4096, 0);
    return /PRIVATE KEY|^\x30\x82/.test(buffer.toString('latin1', 0, bytesRead));
  } finally {
    await fh.close();
  }
}

function looksText(buf: Buffer): boolean {
  return !buf.subarray(0, 8192).includes(0);
}

/** Scrubs the tree at `root` (the mounted copy) and reports paths relative to it. */
export async function scrubTree(root: string): Promise<ScrubReport> {
  const report: ScrubReport = { removed: [], redacted: [] };
  const removePaths = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await fsp.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full);
      if (entry.name === 'lost+found' && dir === root) continue;
      if (entry.isSymbolicLink()) continue;
      const listed = REMOVE_PATHS.includes(rel) || REMOVE_PATHS.some((p) => rel.endsWith(`/${p}`));
      if (entry.isDirectory()) {
        if (listed) {
          removePaths.add(full);
          continue;
        }
        if (entry.name === '.ssh') {
          for (const f of await fsp.readdir(full).catch(() => [] as string[])) {
            if (!f.endsWith('.pub') && f !== 'known_hosts' && f !== 'config' && f !== 'authorized_keys') removePaths.add(path.join(full, f));
          }
        }
        await walk(full);
        continue;
      }
      if (!entry.isFile()) continue;
      if (listed || REMOVE_NAMES.has(entry.name) || isEnvFile(entry.name) || (await isPrivateKeyFile(full, entry.name))) {
        removePaths.add(full);
        continue;
      }
      if (entry.name === 'config' && path.basename(dir) === '.git') {
        // Credentials in remote URLs: https://user:token@host/...
        await redact(full, rel, [/(https?:\/\/)[^/\s:@]+:[^/\s@]+@/g], report, '$1');
        continue;
      }
      await redact(full, rel, KEY_PATTERNS, report);
    }
  };
  await walk(root);
  for (const file of [...removePaths].sort()) {
    const st = await fsp.lstat(file).catch(() => null);
    if (!st) continue;
    await fsp.rm(file, { recursive: true, force: true });
    report.removed.push(path.relative(root, file));
  }
  return report;
}

async function redact(file: string, rel: string, patterns: RegExp[], report: ScrubReport, replacement = '[REDACTED]'): Promise<void> {
  const st = await fsp.stat(file);
  if (st.size === 0 || st.size > MAX_TEXT_BYTES) return;
  const buf = await fsp.readFile(file);
  if (!looksText(buf)) return;
  let text = buf.toString('utf8');
  let count = 0;
  for (const re of patterns) {
    text = text.replace(re, (...args) => {
      count++;
      return replacement.replace('$1', String(args[1] ?? ''));
    });
  }
  if (count === 0) return;
  // Rewrite in place: the old blocks are freed and trimmed with the rest.
  const tmp = `${file}.agentvm-scrub`;
  await fsp.writeFile(tmp, text, { mode: st.mode & 0o7777 });
  await fsp.chown(tmp, st.uid, st.gid).catch(() => undefined);
  await fsp.rename(tmp, file);
  report.redacted.push({ path: rel, count });
}
