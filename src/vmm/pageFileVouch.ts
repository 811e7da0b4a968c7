/**
 * Page files this server wrote and hashed a moment ago. A start checks a saved memory against its
 * record's SHA-256 before it loads it (suspend.ts checkPageFile): the check is for damage at rest. A
 * branch's VMs start from the memory its snapshot wrote a second before, and each read it all again
 * (55 ms of a branch's start for a starter VM under TCG, the parent's CPU too). So the writer vouches
 * for the file as it closes it: the same file (device and inode), of the same size, modified last at
 * the same time (nanoseconds) and less than VOUCH_MS ago, with the same checksum in its record, is
 * not read again. A write to it changes its modification time; a file put in its place is another
 * inode. Links (a branch shares the file by links) change neither. Kept in this process only: after
 * a restart every file is read again.
 */
import type { BigIntStats } from 'node:fs';

/** How long a written file is vouched for: longer than a branch takes to start its VMs. */
export const VOUCH_MS = 60_000;
const MAX_KEPT = 256;

const vouched = new Map<string, { sha256: string; until: number }>();

const keyOf = (st: BigIntStats) => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`;

/** The file of `st` (taken after its last write) has `sha256`. */
export function vouch(st: BigIntStats, sha256: string, now = Date.now()): void {
  for (const [k, v] of vouched) if (v.until <= now) vouched.delete(k);
  if (vouched.size >= MAX_KEPT) vouched.delete(vouched.keys().next().value!);
  vouched.set(keyOf(st), { sha256, until: now + VOUCH_MS });
}

/** Whether the file of `st` is one vouched for with `sha256`, unchanged since, within its time. */
export function isVouched(st: BigIntStats, sha256: string, now = Date.now()): boolean {
  const v = vouched.get(keyOf(st));
  return v !== undefined && v.until > now && v.sha256 === sha256;
}
