import type { VmRow } from '../store/vms.ts';
import type { TemplateRow } from './templates.ts';
import type { KeyRecord as KeyRow } from './keys.ts';
import { getHarness } from '../harness/catalogue.ts';
import type { RunRow } from '../store/runs.ts';
import { previewLabel } from './previews.ts';

/**
 * Rows as the API presents them, which is also what an event records of its object (events.ts):
 * api/present.ts checks each against the contract's schema. Dates become RFC 3339 UTC strings.
 */
export const iso = (d: Date) => d.toISOString();
const isoOrNull = (d: Date | null) => (d ? iso(d) : null);

export function presentVm(vm: VmRow) {
  return {
    vm_id: vm.vm_id,
    preview_label: previewLabel(vm.vm_id),
    status: vm.status,
    status_reason: vm.status_reason,
    plan: vm.plan,
    cycle: vm.cycle,
    tier: vm.tier,
    harness: vm.harness,
    harness_display: getHarness(vm.harness)?.display_name ?? vm.harness,
    ipv4: vm.ipv4,
    template_id: vm.template_id,
    image: vm.root_image_id ?? 'base',
    vcpus: vm.vcpus,
    memory_mib: vm.memory_mib,
    disk_gib: vm.disk_gib,
    secret_names: vm.secret_names,
    brokered_secret_names: vm.brokered_secret_names,
    egress: vm.egress,
    auto_stop_after_s: vm.auto_stop_after_s ?? null,
    auto_resume: vm.auto_resume ?? false,
    expires_at: vm.expires_at ? iso(new Date(vm.expires_at)) : null,
    cost_cents_month: vm.cost_cents_month ?? 0,
    created_at: iso(vm.created_at),
    updated_at: iso(vm.updated_at),
  };
}

export function presentTemplate(t: TemplateRow, tenantId: string) {
  const owned = t.tenant_id === tenantId;
  return {
    template_id: t.template_id,
    slug: t.slug,
    name: t.name,
    description: t.description,
    harness: t.harness,
    visibility: t.visibility,
    owned,
    tags: t.tags,
    forks: t.forks,
    stars: t.stars,
    size_bytes: t.size_bytes,
    status: t.status,
    created_at: iso(t.created_at),
    // The owner always sees the field (null until a public capture is scrubbed); nobody else ever does.
    ...(owned ? { scrub_report: t.scrub_report } : {}),
  };
}


export function presentKey(k: KeyRow) {
  return {
    key_id: k.key_id,
    label: k.label ?? '',
    scope: k.scope,
    prefix: k.prefix,
    created_at: iso(k.created_at),
    last_used_at: isoOrNull(k.last_used_at),
  };
}

/** A run (extension), as the Run schema has it. */
export function presentRun(r: RunRow) {
  return {
    run_id: r.run_id,
    vm_id: r.vm_id,
    status: r.status,
    task: r.task,
    harness: r.harness,
    model: r.model,
    provider: r.provider,
    exit_code: r.exit_code,
    stdout: r.stdout,
    stderr: r.stderr,
    timed_out: r.timed_out,
    duration_ms: r.duration_ms,
    created_at: iso(r.created_at),
    started_at: isoOrNull(r.started_at),
    finished_at: isoOrNull(r.finished_at),
  };
}
