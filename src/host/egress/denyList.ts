/**
 * Addresses the gateway never connects to, whatever a VM's policy: loopback, RFC 1918, shared address
 * space, link-local (the cloud metadata address included), multicast, broadcast and reserved, `0/8`,
 * IPv6 loopback, unique-local and link-local, and the host's own addresses. An IPv6 address that
 * carries an IPv4 one (mapped, NAT64, 6to4) is judged by the IPv4 address inside it.
 */
import { BlockList, isIP } from 'node:net';
import os from 'node:os';

const RANGES: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'shared address space'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved and broadcast'],
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
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

/** The IPv4 address inside an IPv6 one that embeds it (::ffff:a.b.c.d, 64:ff9b::/96, 2002::/16), else null. */
export function embeddedV4(addr: string): string | null {
  const a = addr.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::|::)(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) return dotted[1];
  const words = expandV6(a);
  if (!words) return null;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff) return v4(words[6], words[7]);
  if (words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0)) return v4(words[6], words[7]);
  if (words[0] === 0x2002) return v4(words[1], words[2]);
  return null;
}

function expandV6(a: string): number[] | null {
  if (isIP(a) !== 6 || a.includes('.')) return null;
  const [head, tail] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = a.includes('::') ? 8 - h.length - t.length : 0;
  const words = [...h, ...Array(fill).fill('0'), ...t].map((w) => parseInt(w, 16));
  return words.length === 8 ? words : null;
}

export class DenyList {
  private own = new Set<string>();
  private ownReadAt = 0;

  /** Why `addr` may never be reached, or null when it may. */
  reason(addr: string): string | null {
    const family = isIP(addr);
    if (family === 0) return 'not an IP address';
    const inner = family === 6 ? embeddedV4(addr) : null;
    if (inner) return this.reason(inner);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    const range = FIXED.find((r) => r.type === type && r.list.check(addr, type));
    if (range) return range.label;
    if (this.ownAddresses().has(addr.toLowerCase())) return "the host's own address";
    return null;
  }

  /** The host's interface addresses, read again at most every 10 s (they may change). */
  private ownAddresses(): Set<string> {
    if (Date.now() - this.ownReadAt > 10_000) {
      this.own = new Set(Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address.toLowerCase())));
      this.ownReadAt = Date.now();
    }
    return this.own;
  }
}
