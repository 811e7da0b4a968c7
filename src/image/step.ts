/**
 * What every step of the image build shares: its progress report, the hash that keys a cached step,
 * the mark of a finished one, and running the tools it calls.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Bump when the way an image is put together changes, so that every image is rebuilt. */
export const BUILDER_VERSION = 5;

export type Progress = (message: string) => void;

export function sha256(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
}

/** Whether the cached step in `dir` was finished (its `.complete` is written last). */
export async function done(dir: string): Promise<boolean> {
  return existsSync(path.join(dir, '.complete'));
}

/** Runs a program (never a shell) and answers its stdout; a failure carries the tail of stderr. */
export function runTool(cmd: string, args: string[], opts: { cwd?: string; input?: string } = {}): Promise<string> {
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
