/**
 * The model providers whose keys the gateway brokers: a harness in a VM gets a placeholder key and a
 * base URL on the gateway (`/providers/<id>/`), and the gateway adds the real key on the way out.
 *
 * A policy names a provider by its public API host (`api.anthropic.com`), whatever URL the operator
 * set: the operator's URL (an on-premises proxy, a loopback stand-in, an IP literal) is trusted as the
 * operator's choice and reached only through the brokered path.
 */
import { getHarness } from './catalogue.ts';

export interface Broker {
  id: 'anthropic' | 'openai' | 'google';
  /** The secret's name (a harness's `auth.env` name). */
  env: string;
  /** Where requests go unless the operator points them elsewhere; its host is the one policies name. */
  defaultUrl: string;
  /** The operator setting that points them elsewhere. */
  setting: string;
  /** The request's headers with the client's credential replaced by the real key. */
  authorize(headers: Record<string, unknown>, key: string): void;
}

const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'];
const clear = (h: Record<string, unknown>) => CREDENTIAL_HEADERS.forEach((n) => delete h[n]);

export const BROKERS: readonly Broker[] = [
  {
    id: 'anthropic',
    env: 'ANTHROPIC_API_KEY',
    defaultUrl: 'https://api.anthropic.com',
    setting: 'AGENTVM_PROVIDER_ANTHROPIC_URL',
    authorize: (h, key) => (clear(h), (h['x-api-key'] = key)),
  },
  {
    id: 'openai',
    env: 'OPENAI_API_KEY',
    defaultUrl: 'https://api.openai.com',
    setting: 'AGENTVM_PROVIDER_OPENAI_URL',
    authorize: (h, key) => (clear(h), (h.authorization = `Bearer ${key}`)),
  },
  {
    id: 'google',
    env: 'GEMINI_API_KEY',
    defaultUrl: 'https://generativelanguage.googleapis.com',
    setting: 'AGENTVM_PROVIDER_GOOGLE_URL',
    authorize: (h, key) => (clear(h), (h['x-goog-api-key'] = key)),
  },
];

export const brokerById = (id: string): Broker | undefined => BROKERS.find((b) => b.id === id);

/** The host a policy names the provider by: its public API's, whatever the operator set. */
export const publicHost = (b: Broker): string => new URL(b.defaultUrl).hostname;

/** The HTTP methods the providers' APIs use: the only ones a brokered request may carry. */
export const BROKERED_METHODS: readonly string[] = ['GET', 'POST', 'DELETE'];

/** Where each provider's requests go: the operator's setting or the public API. */
export type ProviderUrls = Record<Broker['id'], string>;

export function providerUrlsFromEnv(env: NodeJS.ProcessEnv = process.env): ProviderUrls {
  const urls = {} as ProviderUrls;
  for (const b of BROKERS) {
    const raw = env[b.setting] || b.defaultUrl;
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new Error(`${b.setting} must be an http(s) URL, not "${raw}"`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`${b.setting} must be an http(s) URL, not "${raw}"`);
    urls[b.id] = raw.replace(/\/+$/, '');
  }
  return urls;
}

/** The secret names of a harness that the platform keeps and the gateway brokers. */
export function brokeredNames(harnessId: string): string[] {
  const env = getHarness(harnessId)?.auth.env ?? [];
  return BROKERS.filter((b) => env.includes(b.env)).map((b) => b.env);
}

/** The provider hosts a harness reaches, by their public names: its default egress allowlist. */
export function providerHosts(harnessId: string): string[] {
  const names = brokeredNames(harnessId);
  return [...new Set(BROKERS.filter((b) => names.includes(b.env)).map(publicHost))].sort();
}
