/**
 * The API replica's side of several machines: each run's start and cancel, secret change and capture goes to the host
 * the VM's row names, through the internal endpoint declared in host/internalContract.ts. Rows
 * coordinate everything else (placement, desired state, leases, heartbeats).
 */
import type { z } from 'zod';
import type { Db } from '../store/db.ts';
import type { Logger } from '../log.ts';
import type { SecretsOutcome, VmExecutor } from '../domain/runs.ts';
import type { DriverProbe } from '../vmm/probe.ts';
import { DomainError, type ErrorCode } from '../domain/errors.ts';
import { ERROR_STATUS } from '../http/errors.ts';
import { INTERNAL_ROUTES, InternalErrorSchema, internalPath, type InternalRoute } from '../host/internalContract.ts';
import * as hostStore from '../store/hosts.ts';
import * as endpoints from '../store/internalCredentials.ts';
import type { HostTarget, InternalClient } from './internalClient.ts';
import * as templateStore from '../store/templates.ts';
import { recordTemplateOutcome } from '../domain/events.ts';

/** Codes a host answers that mean the same to the customer (the VM is not running, wait and retry). */
const PASSED_ON = new Set<ErrorCode>(['vm_not_running', 'rate_limited', 'not_found']);

/** Where a replica reaches a host row's endpoint (null: it has none). */
export const target = (row: endpoints.HostEndpoint | undefined): HostTarget | null =>
  row?.internal_url ? { url: row.internal_url, credentialHash: row.credential_hash } : null;

export class RemoteHosts implements VmExecutor {
  constructor(
    private readonly db: Db,
    private readonly client: InternalClient,
    private readonly log: Logger,
  ) {}

  private async hostOfVm(vmId: string): Promise<HostTarget | null> {
    return target(await endpoints.endpointOfVm(this.db, vmId));
  }

  /**
   * One call to a host's route: the body and the answer checked against the contract. A host's error
   * in the Error shape comes back as the same DomainError when the customer should see it.
   * (remoteSnapshots.ts calls the snapshot routes through it.)
   */
  async call<R extends InternalRoute>(
    host: HostTarget | null,
    route: R,
    id: string,
    body: unknown,
    until: { ms: number },
  ): Promise<z.output<(typeof INTERNAL_ROUTES)[R]['response']>> {
    if (!host) throw new Error('the VM has no reachable host');
    const def = INTERNAL_ROUTES[route];
    const abort = new AbortController();
    const watch = setTimeout(() => abort.abort(new Error(`the VM's host did not answer in ${until.ms} ms`)), until.ms);
    try {
      const res = await this.client.request(host, internalPath(route, id), {
        method: def.method.toUpperCase(),
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: abort.signal,
      });
      const json: unknown = await res.json().catch(() => ({}));
      if (!res.ok) {
        const err = InternalErrorSchema.safeParse(json);
        const code = err.success ? (err.data.error as ErrorCode) : undefined;
        if (code && PASSED_ON.has(code) && ERROR_STATUS[code] === res.status) throw new DomainError(code, err.data!.message, err.data!.hint, retryAfter(res));
        throw new Error(`the VM's host answered ${res.status}: ${err.success ? err.data.message : ''}`);
      }
      return def.response.parse(json) as z.output<(typeof INTERNAL_ROUTES)[R]['response']>;
    } finally {
      clearTimeout(watch);
    }
  }

  async harnesses(vmId: string): Promise<string[] | null> {
    try {
      return (await this.call(await this.hostOfVm(vmId), 'harnesses', vmId, undefined, { ms: 5000 })).harnesses;
    } catch {
      return null; // its host is down or unreachable: the VM cannot run anything now
    }
  }

  /** Tells the VM's host that runs were queued; a host that does not hear finds them within a second. */
  kickRuns(vmId: string): void {
    void (async () => this.call(await this.hostOfVm(vmId), 'runs', vmId, undefined, { ms: 5000 }))().catch(() => undefined);
  }

  async cancelRun(vmId: string, runId: string): Promise<void> {
    await this.call(await this.hostOfVm(vmId), 'cancelRun', vmId, { run_id: runId }, { ms: 10_000 });
  }

  async setSecrets(vmId: string, set: Record<string, string | null>): Promise<SecretsOutcome> {
    return this.call(await this.hostOfVm(vmId), 'secrets', vmId, { set }, { ms: 30_000 });
  }

  /** Hands a capture to the host of the template's source VM; a host that cannot be reached fails it. */
  capture(templateId: string): void {
    void (async () => {
      await this.call(target(await endpoints.endpointOfTemplate(this.db, templateId)), 'capture', templateId, undefined, { ms: 30_000 });
    })().catch(async (err: Error) => {
      this.log.warn({ err, template_id: templateId }, 'handing a capture to its host failed');
      await this.db
        .transaction(async (tx) => {
          await templateStore.markUndelivered(tx, templateId, `the VM's host could not be reached: ${err.message}`.slice(0, 300));
          await recordTemplateOutcome(tx, templateId, new Date());
        })
        .catch(() => undefined);
    });
  }
}

function retryAfter(res: Response): Record<string, string> | undefined {
  const value = res.headers.get('retry-after');
  return value ? { 'Retry-After': value } : undefined;
}

/** What an API replica's /readyz says of VM hosts: usable while at least one host is live. */
export async function liveHostsProbe(db: Db, staleMs: number): Promise<DriverProbe> {
  const n = await hostStore.countTakingVms(db, new Date(Date.now() - staleMs));
  return n > 0
    ? { usable: true, accel: null, qemu: null, detail: `${n} live VM host(s)` }
    : { usable: false, accel: null, qemu: null, detail: 'no live VM host' };
}
