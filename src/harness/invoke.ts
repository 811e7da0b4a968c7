/**
 * How each harness runs one task headless: an argv (never a shell string) with the task as one
 * argument, placed where no option parser can mistake it for a flag, and the non-secret variables
 * that select a provider. Secrets (API keys) come from the VM's own secrets file inside the guest.
 */
import { invalid } from '../domain/errors.ts';
import { getHarness } from './catalogue.ts';
import { HARNESS_PROGRAMS } from '../guest/protocol.ts';
import { GEMINI_VERTEX_SETTINGS_PATH } from './geminiSettings.ts';

export interface Invocation {
  argv: string[];
  env: Record<string, string>;
}

export interface TaskInput {
  task: string;
  model?: string;
  provider?: string;
}

type Builder = (t: TaskInput) => Invocation;

/** The variable that switches a harness to a provider, if it needs one. */
function providerEnv(provider: string | undefined, switches: Record<string, [string, string]>): Record<string, string> {
  const sw = provider ? switches[provider] : undefined;
  return sw ? { [sw[0]]: sw[1] } : {};
}

const BUILDERS: Record<string, Builder> = {
  // claude -p (print mode): one answer, then exit. `--` ends the options before the prompt.
  'claude-code': ({ task, model, provider }) => ({
    argv: ['claude', '-p', '--output-format', 'text', '--dangerously-skip-permissions', ...(model ? ['--model', model] : []), '--', task],
    env: providerEnv(provider, { bedrock: ['CLAUDE_CODE_USE_BEDROCK', '1'], vertex: ['CLAUDE_CODE_USE_VERTEX', '1'] }),
  }),
  // codex exec: non-interactive. The VM is the sandbox: codex's own approvals and sandbox are off.
  codex: ({ task, model }) => ({
    argv: ['codex', 'exec', '--dangerously-bypass-approvals-and-sandbox', '--skip-git-repo-check', '--color', 'never', ...(model ? ['--model', model] : []), '--', task],
    env: {},
  }),
  // gemini -p: one prompt, non-interactive; --yolo approves tool calls. The image's system settings
  // select key auth; Vertex AI has settings of its own, since a selected auth type outranks the environment.
  'gemini-cli': ({ task, model, provider }): Invocation => ({
    argv: ['gemini', '--yolo', ...(model ? ['--model', model] : []), `--prompt=${task}`],
    env: provider === 'vertex' ? { GOOGLE_GENAI_USE_VERTEXAI: 'true', GEMINI_CLI_SYSTEM_SETTINGS_PATH: GEMINI_VERTEX_SETTINGS_PATH } : {},
  }),
  // opencode run: models are named provider/model.
  opencode: ({ task, model, provider }) => ({
    argv: ['opencode', 'run', ...(model ? ['--model', model.includes('/') || !provider ? model : `${provider}/${model}`] : []), '--', task],
    env: {},
  }),
  // aider --message: one message, edits confirmed, no prompts, no update checks.
  aider: ({ task, model, provider }) => ({
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
  echo: ({ task }) => ({ argv: [HARNESS_PROGRAMS.echo, task], env: {} }),
};

/** The invocation of `harnessId` for a task; 400 for a provider the harness does not support. */
export function buildInvocation(harnessId: string, input: TaskInput): Invocation {
  const harness = getHarness(harnessId);
  const build = BUILDERS[harnessId];
  if (!harness || !build) throw invalid('harness', `unknown harness "${harnessId}"`);
  if (input.provider !== undefined && !harness.providers.includes(input.provider)) {
    const supported = harness.providers.length ? `one of ${harness.providers.join(', ')}` : 'none';
    throw invalid('provider', `harness ${harnessId} does not support provider "${input.provider}" (supported: ${supported})`);
  }
  const inv = build(input);
  if (inv.argv[0] !== HARNESS_PROGRAMS[harnessId]) throw new Error(`harness ${harnessId}: argv[0] is not its program`);
  return inv;
}
