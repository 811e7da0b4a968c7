/**
 * Addresses the gateway (and a webhook's delivery) never connects to, whatever a VM's policy: loopback,
 * RFC 1918, shared address space, link-local (the cloud metadata address included), multicast,
 * broadcast, documentation and reserved ranges, `0/8`, IPv6 loopback, unique-local and link-local,
 * and the host's own addresses. Every spelling of an address is judged in its canonical form
 * (ipAddress.ts): an IPv6 address that carries an IPv4 one is judged by the IPv4 address inside it,
 * and an IPv6 literal with a zone id is refused.
 */
import { BlockList, isIP } from 'node:net';
import os from 'node:os';
import { canonicalIp, hasZoneId } from './ipAddress.ts';

const RANGES: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'shared address space'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved and broadcast'],
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'IPv4-compatible'],
  ['64:ff9b:1::', 48, 'NAT64 (local use)'],
  ['100::', 64, 'discard'],
  ['2001::', 32, 'Teredo tunnel'],
  ['2001:db8::', 32, 'documentation'],
  ['fc00::', 7, 'unique local'],
  ['fe80::', 10, 'link-local'],
  ['ff00::', 8, 'multicast'],
];

/** One block list per range, so that a refusal can say which range. */
const FIXED = RANGES.map(([net, prefix, label]) => {
  const list = new BlockList();
  const type = isIP(net) === 4 ? 'ipv4' : 'ipv6';
  list.addSubnet(net, prefix, type);
  return { list, type, label };
});

export class DenyList {
  private own = new Set<string>();
  private ownReadAt = 0;

  /** Why `addr` may never be reached, or null when it may. */
  reason(addr: string): string | null {
    if (hasZoneId(addr)) return 'an IPv6 zone id';
    const canonical = canonicalIp(addr);
    if (canonical === null) return 'not an IP address';
    const type = isIP(canonical) === 4 ? 'ipv4' : 'ipv6';
    const range = FIXED.find((r) => r.type === type && r.list.check(canonical, type));
    if (range) return range.label;
    if (this.ownAddresses().has(canonical)) return "the host's own address";
    return null;
  }

  /** The host's interface addresses, canonical, read again at most every 10 s (they may change). */
  private ownAddresses(): Set<string> {
    if (Date.now() - this.ownReadAt > 10_000) {
      const all = Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => canonicalIp(i.address.split('%')[0])));
      this.own = new Set(all.filter((a): a is string => a !== null));
      this.ownReadAt = Date.now();
    }
    return this.own;
  }
}
