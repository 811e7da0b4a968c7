import type { Logger } from './log.ts';
import type { Mailer } from './domain/login.ts';

/**
 * Login codes go by SMTP when AGENTVM_SMTP_URL is set (for example smtp://user:pass@mail.example:587),
 * else into the server log, for a self-hosted install without mail.
 */
export function createMailer(smtpUrl: string | undefined, from: string, log: Logger): Mailer {
  if (smtpUrl) {
    // nodemailer is loaded with the first mail, not at each start.
    let transport: Promise<{ sendMail(mail: { from: string; to: string; subject: string; text: string }): Promise<unknown> }> | undefined;
    return {
      async send(to, subject, text) {
        try {
          transport ??= import('nodemailer').then((m) => m.default.createTransport(smtpUrl));
          await (await transport).sendMail({ from, to, subject, text });
        } catch (err) {
          log.warn({ err, to }, 'sending a login code by mail failed');
          throw err;
        }
        log.info({ to }, 'login code sent by mail');
      },
    };
  }
  return {
    async send(to, _subject, text) {
      log.info({ to }, `login code (no SMTP configured, so it is here): ${text}`);
    },
  };
}
