import type { Schemas } from './api.ts';
import { TRANSITIONAL, when } from './format.ts';
import type { ConsoleSession } from '../domain/sessions.ts';
import { Csrf } from './layout.tsx';

/** A status word with its colour; a status that will change by itself carries a spinner for those who see it. */
export function Status({ status, reason, label }: { status: string; reason?: string | null; label?: string }) {
  return (
    <span class={`status status-${status}`} data-status={status}>
      {TRANSITIONAL.has(status) ? <span class="spinner" aria-hidden="true"></span> : null}
      {label ?? status}
      {reason ? <span class="status-reason"> ({reason})</span> : null}
    </span>
  );
}

export const shortId = (id: string) => `${id.slice(0, 10)}…`;

export function Time({ at }: { at: string | null | undefined }) {
  return at ? <time datetime={at}>{when(at)}</time> : <span>—</span>;
}

export const pricingOf = (vm: Schemas['VM']) => (vm.tier ? `${vm.tier === 'ondemand' ? 'On-demand' : 'Spot'} tier` : `${vm.plan} · ${vm.cycle}`);

/** A one-button form that changes something, with the session's CSRF token. */
export function ActionButton(props: { session: ConsoleSession; action: string; label: string; variant?: string; back?: string; describedBy?: string }) {
  return (
    <form method="post" action={props.action} class="inline">
      <Csrf session={props.session} />
      {props.back ? <input type="hidden" name="back" value={props.back} /> : null}
      <button type="submit" class={`button small ${props.variant ?? ''}`} aria-describedby={props.describedBy}>
        {props.label}
      </button>
    </form>
  );
}

/** Fixed notices after a change (by code, so that no link can put words on the page). */
export const NOTICES: Record<string, string> = {
  created: 'Your VM is being provisioned. Its status updates here by itself.',
  forked: 'Your VM is being provisioned from the template. Its status updates here by itself.',
  stop: 'Stopping. The persist disk is kept.',
  start: 'Starting. A suspended VM goes on where it was.',
  suspend: 'Suspending: its memory is saved and it stops drawing credits. Start resumes it where it was.',
  restart: 'Restarting with a fresh root filesystem; the persist disk is kept.',
  reprovision: 'Reprovisioning: the guest is rebuilt; the persist disk is kept.',
  destroyed: 'The VM was destroyed and its disks removed.',
  egress: 'Egress policy saved. New connections follow it within a second.',
  secret_set: 'Secret saved. Its value cannot be read back.',
  secret_removed: 'Secret removed.',
  branched: 'Branched: the new VMs resume from the instant this one was paused. Their status updates here by itself.',
  snapshot_taken: 'Snapshot taken: memory, devices and disks. The VM ran on.',
  snapshot_started: 'A VM is starting from the snapshot. Its status updates here by itself.',
  snapshot_deleted: 'The snapshot was deleted. VMs started from it keep running.',
  capturing: 'Capturing the persist disk as a template. It shows as ready here when done.',
  revoked: 'The key was revoked. It stops working within a second.',
  cancelled: 'The run was cancelled.',
  lifetime: 'Idle stop and expiry saved.',
  uploaded: 'The file was uploaded.',
  webhook_deleted: 'The webhook was deleted; nothing more is sent to it.',
  image_deleted: 'The image was deleted. VMs of it had to go first; its layers stay in the build cache.',
};
export const noticeFor = (code: string | undefined) => (code ? (NOTICES[code] ?? null) : null);

export const vmPath = (id: string) => `/console/vms/${encodeURIComponent(id)}`;

/** A run's status; a running run is shown as work in progress (a VM's `running` is a resting state). */
export function RunStatus({ run }: { run: Schemas['Run'] }) {
  return run.status === 'running' ? <Status status="running-run" label="running" /> : <Status status={run.status} />;
}

/** Previous and next links over a paged list, with where the page is; nothing when it all fits on one page. */
export function Pager(props: { base: string; param: string; offset: number; size: number; total: number; label: string; extra?: Record<string, string> }) {
  const link = (o: number) => {
    const q = new URLSearchParams({ ...(props.extra ?? {}), [props.param]: String(o) });
    return `${props.base}?${q}`;
  };
  const end = Math.min(props.offset + props.size, props.total);
  if (props.offset === 0 && end >= props.total) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      {props.offset > 0 ? <a href={link(Math.max(0, props.offset - props.size))}>← Previous</a> : <span class="disabled">← Previous</span>}
      <span class="muted">
        {props.total === 0 ? '0' : `${(props.offset + 1).toLocaleString('en-US')}–${end.toLocaleString('en-US')}`} of {props.total.toLocaleString('en-US')}
      </span>
      {end < props.total ? <a href={link(end)}>Next →</a> : <span class="disabled">Next →</span>}
    </nav>
  );
}
