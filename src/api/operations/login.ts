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
    'asking again retires the earlier code. The answer is the same whether or not the email has an account.',
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
  description: 'Five wrong codes spend the code. The key is labelled as asked (the CLI sends the machine name).',
  tag: 'Login',
  audience: 'public',
  extension: true,
  body: { schema: LoginCompleteRequest, required: true },
  success: { status: 201, schema: IssuedKey, description: 'The new key, with its plaintext shown only here' },
  errors: ['unauthorized', 'quota_exceeded'],
  handler: async ({ services, body }) => {
    const { key, record } = await services.login.complete(body.email, body.code, body.label ?? 'cli');
    return { status: 201, body: presentIssuedKey(record, key) };
  },
});
