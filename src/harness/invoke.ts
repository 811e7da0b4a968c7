/**
 * How each harness runs one task headless: an argv (never a shell string) with the task as one
 * argument, placed where no option parser can mistake it for a flag, and the non-secret variables
 * that select a provider. Every run goes through the egress gateway as its HTTP(S) proxy. A provider
 * key the platform brokers reaches the harness as a placeholder, with its provider's base URL on the
 * gateway (which adds the real key); other secrets come from the VM's secrets file inside the guest.
 */
import { invalid } from '../domain/errors.ts';
import { getHarness } from './catalogue.ts';
import { EGRESS_GATEWAY_NAME, EGRESS_GATEWAY_URL, HARNESS_PROGRAMS } from '../wire/protocol.ts';
import { BROKERS, type Broker } from './providers.ts';
import { GEMINI_VERTEX_SETTINGS_PATH } from './geminiSettings.ts';

/** Where the gateway brokers a provider: `${EGRESS_GATEWAY_URL}${BROKERED_PATH}/<provider id>/…`. */
export const BROKERED_PATH = '/providers';
/** What a harness holds instead of a brokered key: useless anywhere but through its VM's gateway. */
export const BROKERED_PLACEHOLDER = 'agentvm-brokered-key-not-here';

/** The base URL of a brokered provider on the gateway. */
export const brokeredUrl = (provider: Broker['id'], suffix = '') => `${EGRESS_GATEWAY_URL}${BROKERED_PATH}/${provider}${suffix}`;

/** codex's model provider through the gateway, as `-c key=value` TOML settings. */
const CODEX_BROKERED_PROVIDER = [
  'model_providers.agentvm.name="OpenAI through agentvm"',
  `model_providers.agentvm.base_url=${JSON.stringify(brokeredUrl('openai', '/v1'))}`,
  'model_providers.agentvm.env_key="OPENAI_API_KEY"',
  'model_providers.agentvm.wire_api="responses"',
  'model_providers.agentvm.supports_websockets=false',
  'model_provider="agentvm"',
];

/**
 * The proxy variables every run has: curl, git, npm, pip and most HTTP libraries read them. Node's
 * own fetch reads them from Node 24 on (NODE_USE_ENV_PROXY); the guest's Node 20 ignores them, and a
 * program that does reaches nothing, since the gateway is the only address off the VM.
 */
export const PROXY_ENV: Record<string, string> = {
  HTTP_PROXY: EGRESS_GATEWAY_URL,
  HTTPS_PROXY: EGRESS_GATEWAY_URL,
  http_proxy: EGRESS_GATEWAY_URL,
  https_proxy: EGRESS_GATEWAY_URL,
  NO_PROXY: `${EGRESS_GATEWAY_NAME},localhost,127.0.0.1,::1`,
  no_proxy: `${EGRESS_GATEWAY_NAME},localhost,127.0.0.1,::1`,
  NODE_USE_ENV_PROXY: '1',
};

export interface Invocation {
  argv: string[];
  env: Record<string, string>;
}

export interface TaskInput {
  task: string;
  model?: string;
  provider?: string;
}

/** A task, and the secret names of the VM that the platform brokers. */
type Builder = (t: TaskInput, brokered: Set<string>) => Invocation;

/** The placeholder key and base URL variables of each brokered provider the VM has a key for. */
function brokeredEnv(brokered: Set<string>, vars: Partial<Record<Broker['id'], (b: Broker) => Record<string, string>>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const b of BROKERS) if (brokered.has(b.env) && vars[b.id]) Object.assign(env, { [b.env]: BROKERED_PLACEHOLDER }, vars[b.id]!(b));
  return env;
}

/** The variable that switches a harness to a provider, if it needs one. */
function providerEnv(provider: string | undefined, switches: Record<string, [string, string]>): Record<string, string> {
  const sw = provider ? switches[provider] : undefined;
  return sw ? { [sw[0]]: sw[1] } : {};
}

const BUILDERS: Record<string, Builder> = {
  // claude -p (print mode): one answer, then exit. `--` ends the options before the prompt.
  // ANTHROPIC_BASE_URL: the API's origin; claude adds /v1/messages.
  'claude-code': ({ task, model, provider }, brokered) => ({
    argv: ['claude', '-p', '--output-format', 'text', '--dangerously-skip-permissions', ...(model ? ['--model', model] : []), '--', task],
    env: {
      ...providerEnv(provider, { bedrock: ['CLAUDE_CODE_USE_BEDROCK', '1'], vertex: ['CLAUDE_CODE_USE_VERTEX', '1'] }),
      ...brokeredEnv(brokered, { anthropic: (b) => ({ ANTHROPIC_BASE_URL: brokeredUrl(b.id) }) }),
    },
  }),
  // codex exec: non-interactive. The VM is the sandbox: codex's own approvals and sandbox are off.
  // Brokered: a model provider of our own (`-c` config) on the gateway, HTTP Responses API with the
  // placeholder from OPENAI_API_KEY (the built-in `openai` provider cannot be overridden and would
  // first try a WebSocket transport).
  codex: ({ task, model }, brokered) => ({
    argv: [
      'codex',
      'exec',
      '--dangerously-bypass-approvals-and-sandbox',
      '--skip-git-repo-check',
      '--color',
      'never',
      ...(brokered.has('OPENAI_API_KEY') ? CODEX_BROKERED_PROVIDER.flatMap((kv) => ['-c', kv]) : []),
      ...(model ? ['--model', model] : []),
      '--',
      task,
    ],
    env: brokeredEnv(brokered, { openai: () => ({}) }),
  }),
  // gemini -p: one prompt, non-interactive; --yolo approves tool calls. The image's system settings
  // select key auth; Vertex AI has settings of its own, since a selected auth type outranks the
  // environment. GOOGLE_GEMINI_BASE_URL replaces https://generativelanguage.googleapis.com.
  'gemini-cli': ({ task, model, provider }, brokered) => ({
    argv: ['gemini', '--yolo', ...(model ? ['--model', model] : []), `--prompt=${task}`],
    env: {
      ...(provider === 'vertex' ? { GOOGLE_GENAI_USE_VERTEXAI: 'true', GEMINI_CLI_SYSTEM_SETTINGS_PATH: GEMINI_VERTEX_SETTINGS_PATH } : {}),
      ...brokeredEnv(brokered, { google: (b) => ({ GOOGLE_GEMINI_BASE_URL: brokeredUrl(b.id) }) }),
    },
  }),
  // opencode run: models are named provider/model. Its providers' base URLs and keys come from
  // OPENCODE_CONFIG_CONTENT (config as JSON), merged over any config file of the VM's.
  opencode: ({ task, model, provider }, brokered) => {
    const paths = { anthropic: '/v1', openai: '/v1', google: '/v1beta' } as const;
    const providers = Object.fromEntries(
      BROKERS.filter((b) => brokered.has(b.env)).map((b) => [b.id, { options: { baseURL: brokeredUrl(b.id, paths[b.id]), apiKey: BROKERED_PLACEHOLDER } }]),
    );
    return {
      argv: ['opencode', 'run', ...(model ? ['--model', model.includes('/') || !provider ? model : `${provider}/${model}`] : []), '--', task],
      env: {
        ...brokeredEnv(brokered, { anthropic: () => ({}), openai: () => ({}), google: () => ({}) }),
        ...(Object.keys(providers).length ? { OPENCODE_CONFIG_CONTENT: JSON.stringify({ provider: providers }) } : {}),
      },
    };
  },
  // aider --message: one message, edits confirmed, no prompts, no update checks.
  aider: ({ task, model, provider }, _brokered) => ({
    argv: [
      'aider',
      '--yes-always',
      '--no-pretty',
      '--no-check-update',
      '--no-auto-commits',
      ...(model ? [`--model=${model.includes('/') || !provider ? model : `${provider === 'google' ? 'gemini' : provider}/${model}`}`] : []),
      `--message=${task}`,
    ],
    env: {},
  }),
  // The diagnostic harness reads its first argument literally.
  echo: ({ task }) => ({ argv: [HARNESS_PROGRAMS.echo, '--', task], env: {} }),
  ticker: ({ task }) => ({ argv: [HARNESS_PROGRAMS.ticker, task], env: {} }),
};

/**
 * The invocation of `harnessId` for a task; 400 for a provider the harness does not support.
 * `brokered`: the VM's brokered secret names (its `brokered_secret_names`).
 */
export function buildInvocation(harnessId: string, input: TaskInput, brokered: readonly string[] = []): Invocation {
  const harness = getHarness(harnessId);
  const build = BUILDERS[harnessId];
  if (!harness || !build) throw invalid('harness', `unknown harness "${harnessId}"`);
  if (input.provider !== undefined && !harness.providers.includes(input.provider)) {
    const supported = harness.providers.length ? `one of ${harness.providers.join(', ')}` : 'none';
    throw invalid('provider', `harness ${harnessId} does not support provider "${input.provider}" (supported: ${supported})`);
  }
  const inv = build(input, new Set(brokered));
  if (inv.argv[0] !== HARNESS_PROGRAMS[harnessId]) throw new Error(`harness ${harnessId}: argv[0] is not its program`);
  return { argv: inv.argv, env: { ...PROXY_ENV, ...inv.env } };
}

/**
 * What a shell in the VM has beyond its terminal: what a run of its harness has (the gateway as
 * proxy, brokered placeholders and base URLs), without a task. A person who types the harness's
 * command there reaches its provider the way a run does.
 */
export function shellEnvironment(harnessId: string, brokered: readonly string[] = []): Record<string, string> {
  const build = BUILDERS[harnessId];
  return { ...PROXY_ENV, ...(build ? build({ task: '' }, new Set(brokered)).env : {}) };
}
