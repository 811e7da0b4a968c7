import type { z } from 'zod';
import type { KeyRecord as KeyRow } from '../domain/keys.ts';
import type { RunRow } from '../store/runs.ts';
import type { VmRow } from '../domain/vms.ts';
import type { TemplateRow } from '../domain/templates.ts';
import * as presented from '../domain/present.ts';
import type { KeyRecord, Run, RunTaskResult, Template, Vm } from './schemas.ts';

/** Row → response shapes (domain/present.ts, which events record too), each checked against its schema here. */
export const iso = presented.iso;
export const presentVm: (vm: VmRow) => z.input<typeof Vm> = presented.presentVm;
export const presentTemplate: (t: TemplateRow, tenantId: string) => z.input<typeof Template> = presented.presentTemplate;
export const presentKey: (k: KeyRow) => z.input<typeof KeyRecord> = presented.presentKey;
export const presentRun: (r: RunRow) => z.input<typeof Run> = presented.presentRun;

/** A newly issued key: its metadata (never used yet) and, this once, its plaintext. */
export function presentIssuedKey(k: KeyRow, key: string) {
  const { last_used_at: _unused, ...meta } = presentKey(k);
  return { ...meta, key };
}

/** A finished run as the contract's answer to a run: the section-4 fields with its id and status. */
export function presentRunResult(r: RunRow): z.input<typeof RunTaskResult> {
  const finished = r.finished_at ?? r.created_at;
  return {
    run_id: r.run_id,
    status: r.status,
    vm_id: r.vm_id,
    harness: r.harness,
    model: r.model,
    provider: r.provider,
    exit_code: r.exit_code,
    stdout: r.stdout ?? '',
    stderr: r.stderr ?? '',
    timed_out: r.timed_out ?? false,
    duration_ms: r.duration_ms ?? 0,
    // A run cancelled before it started ran for no time.
    started_at: iso(r.started_at ?? finished),
    finished_at: iso(finished),
  };
}
