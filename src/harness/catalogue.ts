/** The agent runtimes a VM can carry. How each is invoked inside the guest lives beside its record. */
export interface HarnessAuth {
  /** `byok`: bring-your-own-key environment variables; `login`: a one-time login inside the VM; `none`. */
  mode: 'byok' | 'login' | 'none';
  env: string[];
  login_command: string | null;
}

export interface Harness {
  id: string;
  display_name: string;
  description: string;
  auth: HarnessAuth;
  providers: string[];
  default: boolean;
}

export const DEFAULT_HARNESS = 'claude-code';

const CATALOGUE: Omit<Harness, 'default'>[] = [
  {
    id: 'claude-code',
    display_name: 'Claude Code',
    description: "Anthropic's agentic coding CLI, run headless with a one-shot prompt.",
    auth: { mode: 'byok', env: ['ANTHROPIC_API_KEY'], login_command: null },
    providers: ['anthropic', 'bedrock', 'vertex'],
  },
  {
    id: 'codex',
    display_name: 'OpenAI Codex CLI',
    description: "OpenAI's coding agent CLI, run non-interactively with `codex exec`.",
    auth: { mode: 'byok', env: ['OPENAI_API_KEY'], login_command: null },
    providers: ['openai'],
  },
  {
    id: 'gemini-cli',
    display_name: 'Gemini CLI',
    description: "Google's open-source coding agent for the terminal, run with a one-shot prompt.",
    auth: { mode: 'byok', env: ['GEMINI_API_KEY'], login_command: null },
    providers: ['google', 'vertex'],
  },
  {
    id: 'opencode',
    display_name: 'opencode',
    description: 'An open-source terminal coding agent that works with many model providers, run with `opencode run`.',
    // Keys in the environment work without a login; `opencode auth login` is the other way.
    auth: { mode: 'byok', env: ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY'], login_command: 'opencode auth login' },
    providers: ['anthropic', 'openai', 'google', 'openrouter'],
  },
  {
    id: 'aider',
    display_name: 'Aider',
    description: 'AI pair programming in the terminal, run with a single message and auto-confirmed edits.',
    auth: { mode: 'byok', env: ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY', 'OPENROUTER_API_KEY', 'DEEPSEEK_API_KEY'], login_command: null },
    providers: ['anthropic', 'openai', 'google', 'openrouter', 'deepseek'],
  },
  {
    id: 'echo',
    display_name: 'Echo (diagnostic)',
    description:
      'Prints one JSON line with the task, hostname, kernel and run counters on the persist disk and the root filesystem: proves a VM, its restart and its fork without an LLM account.',
    auth: { mode: 'none', env: [], login_command: null },
    providers: [],
  },
  {
    id: 'ticker',
    display_name: 'Ticker (diagnostic)',
    description:
      'Prints each line of its task on stdout, one line a second (the first at once), then exits 0: watch a run stream, cancel it or time it out without an LLM account.',
    auth: { mode: 'none', env: [], login_command: null },
    providers: [],
  },
];

const HARNESSES: Harness[] = CATALOGUE.map((h) => ({ ...h, default: h.id === DEFAULT_HARNESS }));
const BY_ID = new Map(HARNESSES.map((h) => [h.id, h]));

export const listHarnesses = (): Harness[] => HARNESSES;
export const getHarness = (id: string): Harness | undefined => BY_ID.get(id);
