/**
 * What every customer command shares: the client with the caller's key, and one way to fail
 * (`error: code: message`, a hint, and the exit code of the API's HTTP status).
 */
import { apiClient, ClientError, resolveCredentials, type ApiClient } from '../client/client.ts';
import type { ErrorCode } from '../domain/errors.ts';
import { ERROR_STATUS } from '../http/errors.ts';
import { EXIT, exitCodeForStatus } from './exitCodes.ts';

/** A failure's exit code: by the HTTP status it came with, else the one its code stands for; `unreachable` had no answer. */
function exitCodeFor(err: ClientError): number {
  if (err.code === 'unreachable') return EXIT.unreachable;
  return exitCodeForStatus(err.status ?? ERROR_STATUS[err.code as ErrorCode]);
}

/** The client with the saved or `AGENTVM_API_KEY` key; `keyless` for the operations anyone may call. */
export async function customerClient(keyless = false): Promise<ApiClient> {
  const { baseUrl, key } = await resolveCredentials();
  if (keyless) return apiClient(baseUrl);
  if (!key) throw new ClientError('unauthorized', 'no API key: run `agentvm login`, or set AGENTVM_API_KEY');
  return apiClient(baseUrl, key);
}

/** Runs a command body; an API error becomes `error: code: message` (+ hint) and its exit code. */
export function apiAction<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      if (err instanceof ClientError) {
        process.stderr.write(`error: ${err.code}${err.message ? `: ${err.message}` : ''}\n${err.hint ? `hint: ${err.hint}\n` : ''}`);
        process.exit(exitCodeFor(err));
      }
      throw err;
    }
  };
}
