/**
 * Hand-written commands of lifecycle hygiene: `vms update` (durations a person types, like 15m and
 * 2h) and `events` (a page, or `--follow` for what happens next).
 */
import { Command, Option } from 'commander';
import { call, ClientError, type Schemas } from '../client/client.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { print, record, table, type Out } from './output.ts';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `90s`, `15m`, `2h`, `7d` (or a bare number of seconds) in seconds; NaN when it is none of these. */
export function parseDuration(text: string): number {
  const m = /^(\d+)\s*([smhd]?)$/.exec(text.trim());
  return m ? Number(m[1]) * UNITS[m[2] || 's'] : Number.NaN;
}

const OFF = new Set(['off', 'never', 'none']);

/** `--auto-stop`: a duration, or off (null). A value that is not one is sent as typed, so the API names the field. */
export function autoStopValue(text: string): number | null | string {
  if (OFF.has(text)) return null;
  const s = parseDuration(text);
  return Number.isNaN(s) ? text : s;
}

/** `--expires`: a duration from now, an RFC 3339 time, or off (null). */
export function expiresValue(text: string, now = Date.now()): string | null {
  if (OFF.has(text)) return null;
  const s = parseDuration(text);
  return Number.isNaN(s) ? text : new Date(now + s * 1000).toISOString();
}

const jsonOpt = () => new Option('--json', 'print JSON (for scripts)');

export function vmsUpdate(cmd: Command): void {
  cmd
    .description("change a VM's idle stop and expiry")
    .argument('<vm_id>')
    .option('--auto-stop <duration>', 'stop the VM after this long without a run, a shell or egress traffic (60s to 7d, e.g. 15m), or off')
    .option('--expires <when>', 'destroy the VM after this long (e.g. 2h), or at an RFC 3339 time, or off')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExamples:\n  agentvm vms update vm_… --auto-stop 15m --expires 2h\n  agentvm vms update vm_… --auto-stop off')
    .action(apiAction(async (id: string, o: Out & { autoStop?: string; expires?: string }) => {
      if (o.autoStop === undefined && o.expires === undefined) throw new ClientError('invalid_request', 'give --auto-stop, --expires or both');
      const body: Record<string, unknown> = {};
      if (o.autoStop !== undefined) body.auto_stop_after_s = autoStopValue(o.autoStop);
      if (o.expires !== undefined) body.expires_at = expiresValue(o.expires);
      const api = await customerClient();
      const vm = await call(api.PATCH('/v1/api/vms/{id}', { params: { path: { id } }, body: body as Schemas['UpdateVMRequest'] }));
      print(vm, o, () => record({ vm_id: vm.vm_id, status: vm.status, auto_stop_after_s: vm.auto_stop_after_s, expires_at: vm.expires_at }));
    }));
}

type Event = Schemas['Event'];
const EVENT_COLUMNS = ['created_at', 'type', 'event_id', 'subject'];
/** The object an event is about, by its id. */
const subject = (e: Event) => {
  const d = e.data as Record<string, unknown>;
  return String(d.run_id ?? d.vm_id ?? d.template_id ?? d.key_id ?? (e.type === 'credits.low' ? `${d.credits_cents} cents left` : ''));
};

export function events(cmd: Command): void {
  cmd
    .description("the tenant's events, oldest first (kept 30 days); --follow prints new ones as they happen")
    .option('--after <event_id>', 'only events after this one')
    .option('--limit <n>', 'how many (1–200; default 50)')
    .option('--follow', 'keep printing new events (from now, or after --after) until interrupted')
    .option('--interval <seconds>', 'how often --follow asks (default 2)', '2')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExamples:\n  agentvm events --limit 20\n  agentvm events --follow --json')
    .action(apiAction(async (o: Out & { after?: string; limit?: string; follow?: boolean; interval: string }) => {
      const api = await customerClient();
      const page = async (after: string | undefined, limit: number) =>
        call(api.GET('/v1/api/events', { params: { query: { after, limit } } }));
      if (!o.follow) {
        const answer = await page(o.after, o.limit ? Number(o.limit) : 50);
        print(answer, o, () => {
          table(answer.data.map((e) => ({ ...e, subject: subject(e) })), EVENT_COLUMNS);
          if (answer.has_more) process.stdout.write(`more: --after ${answer.data[answer.data.length - 1].event_id}\n`);
        });
        return;
      }
      // From now: skip to the end of the feed unless a cursor was given.
      let cursor = o.after;
      if (!cursor) {
        for (;;) {
          const p = await page(cursor, 200);
          if (p.data.length) cursor = p.data[p.data.length - 1].event_id;
          if (!p.has_more) break;
        }
      }
      const intervalMs = Math.max(0.2, Number(o.interval) || 2) * 1000;
      for (;;) {
        const p = await page(cursor, 200);
        for (const e of p.data) {
          process.stdout.write(o.json ? `${JSON.stringify(e)}\n` : `${e.created_at}  ${e.type.padEnd(15)}  ${subject(e)}  ${e.event_id}\n`);
          cursor = e.event_id;
        }
        if (!p.has_more) await new Promise((r) => setTimeout(r, intervalMs));
      }
    }));
}
