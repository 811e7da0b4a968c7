/**
 * IP literals in one canonical spelling, so that a policy or the deny list judges an address and not
 * the way it was written. Pure: no I/O.
 *
 * IPv6 has many spellings of one address (`0:0:0:0:0:ffff:7f00:1`, `::ffff:127.0.0.1`, `0::ffff:7f00:1`),
 * and several ways to carry an IPv4 address inside it (mapped, compatible, translated, NAT64, 6to4):
 * each of those is judged as the IPv4 address it carries.
 */
import { isIP } from 'node:net';

/** The eight 16-bit words of an IPv6 literal (a trailing dotted quad allowed), or null; a zone id is not a literal. */
export function ipv6Words(addr: string): number[] | null {
  const a = addr.toLowerCase();
  if (a.includes('%') || isIP(a) !== 6) return null;
  let body = a;
  const tailWords: number[] = [];
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  if (dotted) {
    const [b0, b1, b2, b3] = dotted.slice(1).map(Number);
    tailWords.push((b0 << 8) | b1, (b2 << 8) | b3);
    body = a.slice(0, dotted.index) + '0:0';
  }
  const [head, tail] = body.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = body.includes('::') ? 8 - h.length - t.length : 0;
  const words = [...h, ...Array<string>(Math.max(fill, 0)).fill('0'), ...t].map((w) => parseInt(w, 16));
  if (words.length !== 8 || words.some((w) => !(w >= 0 && w <= 0xffff))) return null;
  if (tailWords.length) words.splice(6, 2, ...tailWords);
  return words;
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
const zero = (words: number[], from: number, to: number) => words.slice(from, to).every((w) => w === 0);

/**
 * The IPv4 address an IPv6 one carries, else null: mapped (::ffff:0:0/96), compatible (::/96 but `::`
 * and `::1`), translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 */
export function embeddedV4(addr: string): string | null {
  const w = ipv6Words(addr);
  if (!w) return null;
  if (zero(w, 0, 5) && w[5] === 0xffff) return v4(w[6], w[7]);
  if (zero(w, 0, 6) && !(w[6] === 0 && w[7] <= 1)) return v4(w[6], w[7]);
  if (zero(w, 0, 4) && w[4] === 0xffff && w[5] === 0) return v4(w[6], w[7]);
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(w, 2, 6)) return v4(w[6], w[7]);
  if (w[0] === 0x2002) return v4(w[1], w[2]);
  return null;
}

/** RFC 5952 text of eight words: lowercase, no leading zeros, the longest run of two or more zero words as `::`. */
function compress(w: number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (w[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = w.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * The one spelling of an IP literal that decisions compare: an IPv4 address as it is, an IPv6 address
 * that carries an IPv4 one as that IPv4 address, any other IPv6 address compressed; null when `addr` is
 * not an IP literal (or has a zone id, which is never reached).
 */
export function canonicalIp(addr: string): string | null {
  const a = addr.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (isIP(a) === 4) return a;
  const w = ipv6Words(a);
  if (!w) return null;
  return embeddedV4(a) ?? compress(w);
}

/** Whether `host` is an IPv6 literal with a zone id (`fe80::1%eth0`): refused whatever the policy. */
export const hasZoneId = (host: string): boolean => host.includes('%') && isIP(host.replace(/^\[(.*)\]$/, '$1')) === 6;
