import { apiClient, call, ClientError, type ApiClient, type Schemas } from '../client/client.ts';
import type { Principal } from '../domain/keys.ts';

export { call, ClientError, type ApiClient, type Schemas };

/** Sends a request to the API app in process, as `principal` (none: a public operation such as login). */
export type CallApi = (request: Request, principal?: Principal) => Response | Promise<Response>;

/** The base URL of in-process calls: never resolved, never on the network. */
const IN_PROCESS = 'http://agentvm.internal';

/**
 * The typed client the CLI and MCP use, pointed at the API app in this process and acting as the session's
 * principal: the console goes through the very operations of the API (validation, tenancy, money, errors).
 */
export function consoleApi(callApi: CallApi, principal?: Principal): ApiClient {
  return apiClient(IN_PROCESS, undefined, (request) => callApi(request, principal));
}

/** A money POST's Idempotency-Key, carried by its confirmation form so that a second click charges once. */
export const idempotencyHeader = (key: string | undefined): Record<string, string> =>
  key && /^[A-Za-z0-9_-]{16,64}$/.test(key) ? { 'Idempotency-Key': `console-${key}` } : {};
