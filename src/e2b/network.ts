/**
 * E2B's egress rules (`network.allowOut`, `network.denyOut`, `allow_internet_access`, at create and in
 * `PUT /sandboxes/{id}/network`) as agentvm's egress policy (decisions sections 7 and 17). agentvm's
 * egress names hosts, so the one E2B rule it keeps is "deny all, allow these hosts"; a rule by address
 * or CIDR, an egress proxy or a transform rule is refused with the reason instead of being ignored.
 */
import type { Context, Hono } from 'hono';
import type { EgressPolicy } from '../net/egressPolicy.ts';
import type { Services } from '../domain/services.ts';
import type { VmRow } from '../domain/vms.ts';
import { defaultEgress } from '../domain/vmPlacement.ts';
import { E2bError } from './errors.ts';

/** E2B's name for every address (its SDKs' `ALL_TRAFFIC`). */
export const ALL_TRAFFIC = '0.0.0.0/0';

const isAddress = (s: string) => /^[\d.]+(\/\d+)?$/.test(s) || s.includes(':') || s.includes('/');

/**
 * The policy E2B's fields ask for: null when they leave the sandbox its default (nothing denied), a
 * string saying why agentvm cannot keep them.
 */
export function egressFrom(network: { allowOut?: unknown; denyOut?: unknown; egressProxy?: unknown; rules?: unknown }, allowInternetAccess: unknown): EgressPolicy | null | string {
  // Traffic the caller means to go through their proxy, or with their headers, must not go out without.
  if (network.egressProxy !== undefined && network.egressProxy !== null) return "network.egressProxy: not served: a sandbox's traffic leaves through its host's egress gateway";
  const rules = network.rules;
  if (rules !== undefined && rules !== null && !(typeof rules === 'object' && Object.keys(rules).length === 0)) return 'network.rules: not served: agentvm adds credentials to requests with brokered secrets (PUT /v1/api/vms/{id}/secrets)';
  if (allowInternetAccess !== undefined && allowInternetAccess !== null && typeof allowInternetAccess !== 'boolean') return 'allow_internet_access: true or false';
  const list = (v: unknown) => (v === undefined || v === null ? [] : Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null);
  const allow = list(network.allowOut);
  const deny = list(network.denyOut);
  if (!allow || !deny) return 'network.allowOut and network.denyOut: lists of strings';
  if (allowInternetAccess === false) return { mode: 'none', allow: [] };
  if (deny.length === 0) return null;
  const alone = deny.find((d) => d !== ALL_TRAFFIC);
  if (alone) return `network.denyOut: ${alone.slice(0, 100)}: agentvm's egress allows hosts by name; deny all traffic (${ALL_TRAFFIC}) and list the hosts in allowOut`;
  const address = allow.find(isAddress);
  if (address) return `network.allowOut: ${address.slice(0, 100)}: agentvm's egress allows hosts by name (example.com, *.example.com), not addresses`;
  return { mode: 'allowlist', allow: allow.map((h) => h.toLowerCase()) };
}

/** A policy in E2B's words (its sandbox info's `network`): an allowlist denies all but its hosts. */
export function networkOf(policy: EgressPolicy): { allowOut: string[]; denyOut: string[] } {
  if (policy.mode === 'public') return { allowOut: [], denyOut: [] };
  return { allowOut: policy.mode === 'none' ? [] : policy.allow, denyOut: [ALL_TRAFFIC] };
}

/**
 * `PUT /e2b/sandboxes/{id}/network` (E2B's updateNetwork): the sandbox's egress replaced at once by
 * what the body asks (fields left out are cleared: no rule is the default policy of its harness), 204.
 */
export function networkRoute<E extends { Variables: { principal: { tenantId: string } } }>(
  app: Hono<E>,
  services: Services,
  o: { vmOf(c: Context<E>): Promise<{ vm: VmRow }>; writable(c: Context<E>): void },
): void {
  app.put('/sandboxes/:sandboxID/network', async (c) => {
    o.writable(c);
    const { vm } = await o.vmOf(c);
    const body = (await c.req.json().catch(() => null)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new E2bError(400, 'body: send a JSON object');
    const policy = egressFrom(body, body.allow_internet_access);
    if (typeof policy === 'string') throw new E2bError(400, policy);
    await services.vms.setEgress(vm.tenant_id, vm.vm_id, policy ?? defaultEgress(vm.harness));
    return c.body(null, 204);
  });
}
