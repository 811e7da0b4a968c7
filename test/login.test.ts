import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import type { Clock } from '../src/domain/clock.ts';

for (const backend of backends()) {
  describe(`CLI login codes on ${backend.name}`, () => {
    let t: TestApp;
    const clock: Clock & { t: number } = { t: Date.parse('2026-11-01T00:00:00Z'), now() { return new Date(this.t); } };
    const mail: { to: string; text: string }[] = [];
    const codeFor = (email: string) => /code is (\d{6})/.exec(mail.filter((m) => m.to === email).at(-1)!.text)![1];
    before(async () => {
      t = await createTestApp(backend, { clock, mailer: { send: async (to, _s, text) => void mail.push({ to, text }) } });
    });
    after(() => t.close());

    test('a code works once, for ten minutes, and only the newest; unknown emails get the same answer', async () => {
      const { email } = await t.tenant();
      const unknown = await t.request('POST', '/v1/auth/login/start', { body: { email: 'nobody@example.com' } });
      const known = await t.request('POST', '/v1/auth/login/start', { body: { email } });
      assert.deepEqual(unknown.body, known.body);
      assert.equal(mail.filter((m) => m.to === 'nobody@example.com').length, 0);
      const first = codeFor(email);
      // A new code each time: a second draw the same as the first (one in a million) is drawn again.
      let second = first;
      for (let i = 0; i < 3 && second === first; i++) {
        await t.request('POST', '/v1/auth/login/start', { body: { email } });
        second = codeFor(email);
      }
      assert.notEqual(second, first, 'each start sends a new code');
      const old = await t.request('POST', '/v1/auth/login/complete', { body: { email, code: first } });
      assert.equal(old.status, 401, 'an older code no longer works');
      const ok = await t.request('POST', '/v1/auth/login/complete', { body: { email, code: second, label: 'laptop' } });
      assert.equal(ok.status, 201);
      assert.equal(ok.body.scope, 'readwrite');
      assert.equal(ok.body.label, 'laptop');
      assert.equal((await t.request('GET', '/v1/api/whoami', { key: ok.body.key })).status, 200);
      assert.equal((await t.request('POST', '/v1/auth/login/complete', { body: { email, code: second } })).status, 401);

      clock.t += 16 * 60_000;
      await t.request('POST', '/v1/auth/login/start', { body: { email } });
      clock.t += 10 * 60_000 + 1;
      assert.equal((await t.request('POST', '/v1/auth/login/complete', { body: { email, code: codeFor(email) } })).status, 401);
    });

    test('five wrong guesses spend a code; more than five codes in 15 minutes is 429; bad input is 400', async () => {
      clock.t += 60 * 60_000;
      const { email } = await t.tenant();
      await t.request('POST', '/v1/auth/login/start', { body: { email } });
      const code = codeFor(email);
      const wrong = code === '123456' ? '654321' : '123456';
      for (let i = 0; i < 5; i++) assert.equal((await t.request('POST', '/v1/auth/login/complete', { body: { email, code: wrong } })).status, 401);
      assert.equal((await t.request('POST', '/v1/auth/login/complete', { body: { email, code } })).status, 401);
      for (let i = 0; i < 4; i++) assert.equal((await t.request('POST', '/v1/auth/login/start', { body: { email } })).status, 200);
      const limited = await t.request('POST', '/v1/auth/login/start', { body: { email } });
      assert.equal(limited.status, 429);
      assert.ok(limited.headers.get('retry-after'));
      assert.equal((await t.request('POST', '/v1/auth/login/start', { body: { email: 'not-an-email' } })).status, 400);
      assert.equal((await t.request('POST', '/v1/auth/login/complete', { body: { email, code: '12ab56' } })).status, 400);
    });
  });
}

test('with AGENTVM_SMTP_URL the code goes out by SMTP (a real SMTP peer on loopback)', async (t) => {
  const { SMTPServer } = await import('smtp-server');
  const { createMailer } = await import('../src/mail.ts');
  const { createLogger } = await import('../src/log.ts');
  const { Writable } = await import('node:stream');
  // A real SMTP receiver (nodemailer's smtp-server) on a loopback port; it keeps every message whole.
  let received = '';
  let envelope: { from: string; to: string[] } | undefined;
  const peer = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      envelope = { from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address) };
      stream.on('data', (c: Buffer) => (received += c));
      stream.on('end', () => callback());
    },
  });
  const port: number = await new Promise((resolve) => {
    peer.listen(0, '127.0.0.1', () => resolve((peer.server.address() as { port: number }).port));
  });
  t.after(() => new Promise<void>((resolve) => peer.close(() => resolve())));
  const logLines: string[] = [];
  const mailer = createMailer(`smtp://127.0.0.1:${port}`, 'agentvm <noreply@example.com>', createLogger('info', new Writable({ write: (c, _e, cb) => (logLines.push(String(c)), cb()) })));
  await mailer.send('someone@example.com', 'Your agentvm login code', 'Your agentvm login code is 123456.');
  assert.deepEqual(envelope, { from: 'noreply@example.com', to: ['someone@example.com'] });
  assert.match(received, /^To: someone@example\.com/m);
  assert.match(received, /login code is 123456/);
  assert.ok(!logLines.join('').includes('123456'), 'the code is not in the log when it went by mail');
});
