/**
 * E2B's signed file URLs (signature.ts) against E2B's own SDK making them (`getSignature` of the `e2b`
 * package): a download and an upload, with and without a user and an expiration; the wrong operation,
 * path, user or token; an expired one; a forged expiration. The same through a real sandbox:
 * test/e2b.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getSignature } from 'e2b';
import { checkSignature, signedOnly } from './signature.ts';

const TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';

async function signedUrl(opts: { path: string; operation: 'read' | 'write'; user?: string; expirationInSeconds?: number; token?: string }): Promise<URL> {
  const sig = await getSignature({ path: opts.path, operation: opts.operation, user: opts.user, expirationInSeconds: opts.expirationInSeconds, envdAccessToken: opts.token ?? TOKEN });
  const url = new URL('http://127.0.0.1:8080/files');
  if (opts.user) url.searchParams.set('username', opts.user);
  if (opts.path) url.searchParams.set('path', opts.path);
  url.searchParams.set('signature', sig.signature);
  if (sig.expiration) url.searchParams.set('signature_expiration', String(sig.expiration));
  return url;
}

test("E2B's SDK's signatures are valid for their operation, path, user and token only, within their time", async () => {
  const now = Date.now();
  const read = await signedUrl({ path: 'hello.txt', operation: 'read' });
  assert.ok(signedOnly(read));
  assert.equal(checkSignature(read, 'GET', TOKEN, now), 'valid');
  assert.equal(checkSignature(read, 'POST', TOKEN, now), 'invalid', 'a download signature does not upload');
  assert.equal(checkSignature(read, 'GET', TOKEN.replace('a', 'b'), now), 'invalid', "another sandbox's token");
  const other = new URL(read);
  other.searchParams.set('path', 'secret.txt');
  assert.equal(checkSignature(other, 'GET', TOKEN, now), 'invalid', 'another path');
  const asRoot = new URL(read);
  asRoot.searchParams.set('username', 'root');
  assert.equal(checkSignature(asRoot, 'GET', TOKEN, now), 'invalid', 'another user');

  const upload = await signedUrl({ path: '', operation: 'write', user: 'root', expirationInSeconds: 60 });
  assert.equal(checkSignature(upload, 'POST', TOKEN, now), 'valid');
  assert.equal(checkSignature(upload, 'POST', TOKEN, now + 61_000), 'expired');
  const longer = new URL(upload);
  longer.searchParams.set('signature_expiration', String(Number(upload.searchParams.get('signature_expiration')) + 3600));
  assert.equal(checkSignature(longer, 'POST', TOKEN, now), 'invalid', 'an expiration moved by hand');
  longer.searchParams.set('signature_expiration', 'soon');
  assert.equal(checkSignature(longer, 'POST', TOKEN, now), 'invalid');

  const expired = await signedUrl({ path: 'hello.txt', operation: 'read', expirationInSeconds: -10 });
  assert.equal(checkSignature(expired, 'GET', TOKEN, now), 'expired');
  assert.equal(signedOnly(new URL('http://127.0.0.1:8080/files?path=a')), false, 'no signature: not a signed URL');
});
