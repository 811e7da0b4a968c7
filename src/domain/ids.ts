import crypto, { randomBytes, createHash } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62: bytes of 248 or more are dropped so that no character is more likely. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export type IdPrefix = 'vm' | 'tpl' | 'key' | 'ten' | 'host' | 'ch' | 'lc' | 'run' | 'ses' | 'img' | 'snap';
export const newId = (prefix: IdPrefix) => `${prefix}_${randomBase62(22)}`;

export const KEY_PREFIX = 'avm_live_';
export const newApiKey = () => `${KEY_PREFIX}${randomBase62(40)}`;
/** One-shot `crypto.hash` where Node has it (20.12+): a third of createHash's cost, on every request's key. */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('sha256', text, 'hex') : (text) => createHash('sha256').update(text).digest('hex');
