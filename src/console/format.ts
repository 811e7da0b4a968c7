/** How the console writes money, sizes and times: the same everywhere, in the customer's words. */
import { TRANSITIONAL as VM_TRANSITIONAL } from '../domain/vmState.ts';

export function money(cents: number): string {
  const sign = cents < 0 ? '−' : '';
  const abs = Math.abs(cents);
  return `${sign}$${Math.floor(abs / 100).toLocaleString('en-US')}.${String(abs % 100).padStart(2, '0')}`;
}

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** An RFC 3339 time as "2026-11-23 14:56 UTC". */
export function when(isoTime: string | null | undefined): string {
  if (!isoTime) return '—';
  return `${isoTime.slice(0, 10)} ${isoTime.slice(11, 16)} UTC`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export const count = (n: number) => n.toLocaleString('en-US');

/**
 * Statuses that change by themselves soon: pages showing them poll quickly. A VM's transitions, a
 * template's capture, an image's build, and a run at work (`running-run`).
 */
export const TRANSITIONAL = new Set<string>([...VM_TRANSITIONAL, 'capturing', 'queued', 'building', 'running-run']);
