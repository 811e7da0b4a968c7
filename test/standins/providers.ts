import { serveProvider, type Provider, type SeenRequest } from './http.ts';
import { anthropicApi } from './anthropic.ts';
import { openaiApi } from './openai.ts';
import { googleApi } from './google.ts';
import { DEFAULT_STANDIN_COMMAND, type TurnScript } from './turn.ts';

export type { Provider, SeenRequest } from './http.ts';
export { DEFAULT_STANDIN_COMMAND, STANDIN_PROOF_PATH } from './turn.ts';
export { startEchoHost, type EchoHost } from './echoHost.ts';

export interface ProviderStandinOptions {
  /** The shell command the stand-in model asks the agent to run; by default it writes and prints the proof file. */
  command?: string;
  /** A task of several shell tool calls, in turn (Anthropic's stand-in); `command` is then not used. */
  commands?: string[];
  /** The answer after the tool has run; `done` by default. */
  finalText?: string;
  /** The answer to side requests that offer no tools (titles, summaries); `ok` by default. */
  sideText?: string;
  /** Credentials each provider accepts; a provider left out accepts any (and none). */
  keys?: Partial<Record<Provider, string>>;
}

export interface ProviderEndpoint {
  /** Origin of the provider's server: `http://127.0.0.1:PORT`. */
  url: string;
  /**
   * What the provider's SDK takes as its base URL: the origin for Anthropic (ANTHROPIC_BASE_URL) and
   * Google (GOOGLE_GEMINI_BASE_URL), the origin plus `/v1` for OpenAI (OPENAI_BASE_URL).
   */
  baseUrl: string;
}

export interface ProviderStandins {
  anthropic: ProviderEndpoint;
  openai: ProviderEndpoint;
  google: ProviderEndpoint;
  /** Every request any of the three saw, in arrival order. */
  seen: SeenRequest[];
  /**
   * Anthropic's next streamed answer that calls the tool (to a client whose user-agent matches, when
   * given) stalls after its first events: resolves when it has.
   */
  stallNextCall(userAgent?: RegExp): Promise<void>;
  close(): Promise<void>;
}

/**
 * Stand-ins for Anthropic's, OpenAI's and Google's model APIs, each on its own loopback port, whose
 * "model" runs one scripted agent turn: call the shell tool with the command, then say `done`.
 */
export async function startProviderStandins(opts: ProviderStandinOptions = {}): Promise<ProviderStandins> {
  const script: TurnScript = {
    command: opts.command ?? DEFAULT_STANDIN_COMMAND,
    commands: opts.commands,
    finalText: opts.finalText ?? 'done',
    sideText: opts.sideText ?? 'ok',
  };
  const seen: SeenRequest[] = [];
  const [anthropic, openai, google] = await Promise.all(
    [anthropicApi(script), openaiApi(script), googleApi(script)].map((api) => serveProvider(api, seen, opts.keys?.[api.provider])),
  );
  return {
    anthropic: { url: anthropic.url, baseUrl: anthropic.url },
    openai: { url: openai.url, baseUrl: `${openai.url}/v1` },
    google: { url: google.url, baseUrl: google.url },
    seen,
    stallNextCall: (userAgent) => new Promise<void>((stalled) => (script.stallNextCall = { stalled, userAgent })),
    close: async () => {
      await Promise.all([anthropic.close(), openai.close(), google.close()]);
    },
  };
}
