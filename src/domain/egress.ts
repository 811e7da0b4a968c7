/**
 * A VM's egress policy and the gateway's decision on a name. Pure: no I/O (the host's gateway,
 * src/host/egress/, applies it).
 *
 * `mode`: `none` (nothing leaves the VM), `allowlist` (only the names in `allow`), `public` (any public
 * address). Whatever the policy, the address a name resolves to is checked against the deny list at
 * connect time (denyList.ts); this module decides on the name alone.
 */
import { parse as parseDomain } from 'tldts';
import { isIP } from 'node:net';
import { canonicalIp } from '../net/ipAddress.ts';
import type { EgressMode, EgressPolicy } from '../net/egressPolicy.ts';

export type { EgressMode, EgressPolicy };
export const EGRESS_MODES: readonly EgressMode[] = ['none', 'allowlist', 'public'];

export const MAX_ALLOW_ENTRIES = 100;
const MAX_NAME = 253;
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Named sets of hosts a policy may allow in one entry (`@npm`): the package registries and code hosts a
 * workstation's tools reach. Expanded when the gateway decides; a preset counts as one entry.
 */
export const EGRESS_PRESETS: Readonly<Record<string, readonly string[]>> = {
  '@debian': ['deb.debian.org', 'security.debian.org'],
  '@npm': ['registry.npmjs.org'],
  '@pypi': ['pypi.org', 'files.pythonhosted.org'],
  '@github': ['github.com', 'api.github.com', 'codeload.github.com', 'objects.githubusercontent.com', 'raw.githubusercontent.com'],
  '@crates': ['crates.io', 'index.crates.io', 'static.crates.io'],
  '@go': ['proxy.golang.org', 'sum.golang.org'],
};

/** The hosts of a preset entry, or null when `entry` is not one. */
export const presetHosts = (entry: string): readonly string[] | null => (Object.hasOwn(EGRESS_PRESETS, entry) ? EGRESS_PRESETS[entry] : null);

/** What is wrong with one `allow` entry, or null when it is a lowercase hostname, `*.` + a domain, or a preset. */
export function allowEntryProblem(entry: string): string | null {
  if (entry.startsWith('@')) {
    return presetHosts(entry) ? null : `is not a preset (${Object.keys(EGRESS_PRESETS).join(', ')})`;
  }
  const wildcard = entry.startsWith('*.');
  const name = wildcard ? entry.slice(2) : entry;
  if (entry === '*' || entry === '*.') return 'a wildcard alone would allow everything: use mode "public"';
  if (name.length === 0) return 'is empty';
  if (name.length > MAX_NAME) return `is longer than ${MAX_NAME} characters`;
  if (name !== name.toLowerCase()) return 'must be lowercase';
  if (isIP(name) || /^[0-9.]+$/.test(name)) return 'is an IP address: allow entries are hostnames';
  if (name.includes('*')) return 'may hold a wildcard only as its first label ("*.example.com")';
  const labels = name.split('.');
  if (labels.some((l) => l.length === 0)) return 'has an empty label';
  const bad = labels.find((l) => !LABEL.test(l));
  if (bad !== undefined) return `has the invalid label "${bad}" (letters, digits and inner hyphens, at most 63)`;
  if (wildcard) {
    // `*.com`, `*.co.uk`, `*.github.io`: a wildcard over a public suffix would allow a whole registry.
    const p = parseDomain(name, { allowPrivateDomains: true });
    if (p.publicSuffix === name || p.domain === null) return `is a wildcard over the public suffix "${name}"`;
  }
  return null;
}

/** What is wrong with a policy (field path and message), or null. Shapes are checked by the API schema. */
export function policyProblem(p: EgressPolicy): { field: string; message: string } | null {
  if (!EGRESS_MODES.includes(p.mode)) return { field: 'egress.mode', message: `must be one of ${EGRESS_MODES.join(', ')}` };
  if (p.allow.length > MAX_ALLOW_ENTRIES) return { field: 'egress.allow', message: `holds at most ${MAX_ALLOW_ENTRIES} entries` };
  for (const [i, entry] of p.allow.entries()) {
    const problem = allowEntryProblem(entry);
    if (problem) return { field: `egress.allow[${i}]`, message: `"${entry.slice(0, 80)}" ${problem}` };
  }
  return null;
}

/** The policy as stored: entries without duplicates, in a stable order. */
export function normalizePolicy(p: EgressPolicy): EgressPolicy {
  return { mode: p.mode, allow: [...new Set(p.allow)].sort() };
}

/**
 * The name a client asked for, as the decision compares it: lowercase, without a trailing dot or IPv6
 * brackets, and an IP literal in its one canonical spelling (an IPv6 address carrying an IPv4 one as that
 * IPv4 address).
 */
export function canonicalHost(host: string): string {
  const name = host.trim().toLowerCase().replace(/\.$/, '').replace(/^\[(.*)\]$/, '$1');
  return canonicalIp(name) ?? name;
}

export type Decision = { allowed: true; reason: string } | { allowed: false; reason: string };

/** The policy's decision on a name (or an IP literal), before any resolution. */
export function decideName(policy: EgressPolicy, rawHost: string): Decision {
  const host = canonicalHost(rawHost);
  if (policy.mode === 'none') return { allowed: false, reason: 'policy mode none' };
  if (policy.mode === 'public') return { allowed: true, reason: 'policy mode public' };
  if (isIP(host)) return { allowed: false, reason: 'not in the allowlist (an IP address)' };
  for (const entry of policy.allow) {
    const preset = presetHosts(entry);
    if (preset?.includes(host)) return { allowed: true, reason: `allowlist ${entry} (${host})` };
    if (entry === host) return { allowed: true, reason: `allowlist ${entry}` };
    if (entry.startsWith('*.') && host.endsWith(entry.slice(1)) && host.length > entry.length - 1) return { allowed: true, reason: `allowlist ${entry}` };
  }
  return { allowed: false, reason: 'not in the allowlist' };
}

/** The hosts a policy's `allow` names, presets expanded: what a person reads to know what a VM reaches. */
export function expandedAllow(allow: readonly string[]): string[] {
  return [...new Set(allow.flatMap((entry) => presetHosts(entry) ?? [entry]))].sort();
}

/** `name=address,…` (AGENTVM_EGRESS_HOSTS): names the gateway resolves to a fixed address. */
export function parsePins(raw: string | undefined): Map<string, string> {
  const pins = new Map<string, string>();
  for (const part of (raw ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const [name, address] = part.split('=').map((s) => s?.trim());
    if (!name || !address || isIP(address) === 0) throw new Error(`AGENTVM_EGRESS_HOSTS: "${part}" is not name=address`);
    pins.set(canonicalHost(name), address);
  }
  return pins;
}
