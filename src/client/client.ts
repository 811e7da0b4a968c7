/**
 * The typed client the CLI and the MCP server share: openapi-fetch over the types generated from the
 * served OpenAPI document (src/client/api.d.ts). Errors come back as ClientError with the API's code.
 */
import createClient, { type Client } from 'openapi-fetch';
import { readFile, writeFile, mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { paths, components } from './api.d.ts';

export type Schemas = components['schemas'];
export type ApiClient = Client<paths>;

export class ClientError extends Error {
  constructor(
    /** The API's error code, or `unreachable` when no answer came. */
    readonly code: string,
    message: string,
    readonly hint?: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export interface SavedLogin {
  base_url: string;
  api_key: string;
  key_id: string;
  email: string;
}

export function configPath(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'agentvm', 'config.json');
}

export async function readSavedLogin(): Promise<SavedLogin | null> {
  try {
    return JSON.parse(await readFile(configPath(), 'utf8')) as SavedLogin;
  } catch {
    return null;
  }
}

export async function saveLogin(login: SavedLogin): Promise<void> {
  const file = configPath();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 });
}

export async function forgetLogin(): Promise<void> {
  await rm(configPath(), { force: true });
}

/** Where to send requests and with which key: env first, then the saved login. */
export async function resolveCredentials(): Promise<{ baseUrl: string; key: string | undefined }> {
  const saved = await readSavedLogin();
  const baseUrl = (process.env.AGENTVM_BASE_URL || saved?.base_url || DEFAULT_BASE_URL).replace(/\/+$/, '');
  const key = process.env.AGENTVM_API_KEY || saved?.api_key || undefined;
  return { baseUrl, key };
}

/** `fetch` may be a server's own handler (the MCP endpoint calls the API in process). */
export function apiClient(baseUrl: string, key?: string, fetch?: (request: Request) => Promise<Response> | Response): ApiClient {
  return createClient<paths>({
    baseUrl,
    headers: key ? { authorization: `Bearer ${key}` } : {},
    ...(fetch ? { fetch: async (request: Request) => fetch(request) } : {}),
  });
}

/** Awaits an openapi-fetch call: its data, or a ClientError carrying the API's code, message and hint. */
export async function call<T>(request: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await request;
  } catch (err) {
    const cause = (err as { cause?: { code?: string; cause?: { code?: string } } }).cause;
    const why = cause?.code ?? cause?.cause?.code ?? (err as Error).message;
    throw new ClientError('unreachable', `cannot reach the agentvm server (${why})`, 'is `agentvm serve` running? check AGENTVM_BASE_URL');
  }
  if (result.error !== undefined || !result.response.ok) {
    const e = (result.error ?? {}) as { error?: string; message?: string; hint?: string };
    const code = e.error ?? `http_${result.response.status}`;
    const hint = e.hint ?? (code === 'unauthorized' ? 'the key is missing, wrong or revoked: run `agentvm login` or check AGENTVM_API_KEY' : undefined);
    throw new ClientError(code, e.message ?? '', hint, result.response.status);
  }
  return result.data as T;
}
