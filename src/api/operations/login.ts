import { defineOperation } from '../operation.ts';
import { IssuedKey, LoginCompleteRequest, LoginStartRequest, LoginStartResponse } from '../schemas.ts';
import { presentIssuedKey } from '../present.ts';

export const loginStart = defineOperation({
  operationId: 'loginStart',
  method: 'post',
  path: '/v1/auth/login/start',
  summary: 'Send a one-time login code to an account email (extension, for the CLI)',
  description:
    'The code goes by mail (or, on a server without SMTP, into its log), works once, for 10 minutes; ' +
    'asking again retires the earlier code. The answer, and its timing, are the same whether or not the email has an ' +
    'account: five codes per email in 15 minutes, then 429 with Retry-After, for every email.',
  tag: 'Login',
  audience: 'public',
  extension: true,
  body: { schema: LoginStartRequest, required: true },
  success: { status: 200, schema: LoginStartResponse, description: 'A code is on its way if the email has an account' },
  errors: ['rate_limited'],
  handler: async ({ services, body }) => ({ body: { sent: true as const, ...(await services.login.start(body.email)) } }),
});

export const loginComplete = defineOperation({
  operationId: 'loginComplete',
  method: 'post',
  path: '/v1/auth/login/complete',
  summary: 'Trade a login code for a new readwrite API key (extension, for the CLI)',
  description:
    'Five wrong codes spend the code. Ten wrong codes for an email in an hour, and every code for it (the right one too) ' +
    'is 429 with Retry-After until the hour has passed, whether or not the email has an account. A wrong code counts ' +
    'against the client address too (30 failed authentications a minute, then 429 before anything is looked up). ' +
    'The key is labelled as asked (the CLI sends the machine name).',
  tag: 'Login',
  audience: 'public',
  extension: true,
  body: { schema: LoginCompleteRequest, required: true },
  success: { status: 201, schema: IssuedKey, description: 'The new key, with its plaintext shown only here' },
  errors: ['unauthorized', 'quota_exceeded', 'rate_limited'],
  handler: async ({ services, body }) => {
    const { key, record } = await services.login.complete(body.email, body.code, body.label ?? 'cli');
    return { status: 201, body: presentIssuedKey(record, key) };
  },
});
