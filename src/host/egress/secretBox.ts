/**
 * Secrets at rest: AES-256-GCM with a key from `AGENTVM_SECRETS_KEY` (32 bytes, hex or base64) or,
 * without it, a key generated once into the data dir (`secrets.key`, mode 0600). A sealed value names
 * its key (the first bytes of the key's hash), so a wrong key is an error rather than garbage, and it is
 * bound to the VM and name it was sealed for (additional data): a row copied to another VM opens nowhere.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

const FORMAT = 'v1';

export class SecretBox {
  readonly keyId: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('the secrets key must be 32 bytes');
    this.keyId = createHash('sha256').update(key).digest('hex').slice(0, 12);
  }

  /** The key from `AGENTVM_SECRETS_KEY` when set, else the data dir's own (made on first use, mode 0600). */
  static async open(dataDir: string, fromEnv?: string): Promise<SecretBox> {
    if (fromEnv) return new SecretBox(parseKey(fromEnv));
    const file = path.join(dataDir, 'secrets.key');
    try {
      return new SecretBox(parseKey((await readFile(file, 'utf8')).trim()));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      await writeFile(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another process made it first
    }
    return new SecretBox(parseKey((await readFile(file, 'utf8')).trim()));
  }

  seal(plain: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context));
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [FORMAT, this.keyId, iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join(':');
  }

  open(sealed: string, context: string): string {
    const [format, keyId, iv, tag, body] = sealed.split(':');
    if (format !== FORMAT || body === undefined) throw new Error('not a sealed secret');
    if (keyId !== this.keyId) throw new Error(`sealed with another secrets key (${keyId}), not this host's (${this.keyId})`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}

function parseKey(raw: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  if (key.length !== 32) throw new Error('AGENTVM_SECRETS_KEY must be 32 bytes as 64 hex digits or base64');
  return key;
}
