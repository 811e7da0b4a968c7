import { fields, list } from './http.ts';

export const STANDIN_PROOF_PATH = '/persist/workspace/standin-proof.txt';

/** The command a stand-in model asks the agent to run unless told otherwise: proves the tool ran in the VM. */
export const DEFAULT_STANDIN_COMMAND = `mkdir -p /persist/workspace && echo brokered-ok > ${STANDIN_PROOF_PATH} && cat ${STANDIN_PROOF_PATH}`;

/** What the stand-in model says: the command it runs through the agent's shell tool, and its texts. */
export interface TurnScript {
  command: string;
  /**
   * A task of several tool calls, one after another: the nth call runs the nth command (each once the
   * agent has sent the result of the one before). Where the request says how many results it carries.
   */
  commands?: string[];
  /** The answer once the tool has run (or when tools are offered but none is a shell). */
  finalText: string;
  /** The answer to side requests that offer no tools (titles, summaries). */
  sideText: string;
  /**
   * Armed by a test: the next streamed answer that calls the tool stops after its first events and
   * says nothing more (a model's stream cut off in the middle), and this is called; later answers are whole.
   */
  stallNextCall?: { stalled: () => void; userAgent?: RegExp };
}

/**
 * A tool the request offers, in provider-neutral form. `local_shell` is OpenAI's built-in shell;
 * `code_mode` a freeform tool that runs JavaScript calling nested tools (codex's `exec`).
 */
export interface ToolOffer {
  name: string;
  kind: 'function' | 'local_shell' | 'code_mode';
  schema?: unknown;
}

export interface TurnRequest {
  tools: ToolOffer[];
  /** Whether the conversation already carries a tool's result. */
  toolOutputSeen: boolean;
  /** How many tool results it carries, where the provider's request tells. */
  toolOutputs?: number;
  /** The JSON schema the answer must follow, when the request asks for structured output. */
  jsonSchema?: unknown;
}

export type TurnReply =
  | { kind: 'call'; tool: ToolOffer; args: Record<string, unknown>; command: string }
  | { kind: 'text'; text: string };

/**
 * One scripted agent turn: call the shell tool with the command until a tool result comes back, then
 * answer the final text. Structured-output requests get the smallest value their schema allows.
 */
export function scriptedTurn(script: TurnScript, req: TurnRequest): TurnReply {
  const shell = pickShellTool(req.tools);
  const next = script.commands && req.toolOutputs !== undefined ? script.commands[req.toolOutputs] : undefined;
  if (shell && next !== undefined) {
    return { kind: 'call', tool: shell, args: shell.kind === 'function' ? shellArgs(shell.schema, next, 600_000) : {}, command: next };
  }
  if (shell && !req.toolOutputSeen && !(script.commands && req.toolOutputs !== undefined)) {
    return { kind: 'call', tool: shell, args: shell.kind === 'function' ? shellArgs(shell.schema, script.command) : {}, command: script.command };
  }
  if (req.jsonSchema !== undefined) return { kind: 'text', text: JSON.stringify(minimalValue(req.jsonSchema)) };
  return { kind: 'text', text: req.tools.length > 0 ? script.finalText : script.sideText };
}

// The harnesses' own shell tools, most specific first: claude-code, opencode, codex, gemini-cli.
const KNOWN_SHELLS = ['Bash', 'bash', 'shell', 'shell_command', 'exec_command', 'run_shell_command'];

/** The tool that runs a shell command: a known name, else any function named like a shell that is not a helper of one. */
export function pickShellTool(tools: ToolOffer[]): ToolOffer | undefined {
  const functions = tools.filter((t) => t.kind === 'function');
  for (const name of KNOWN_SHELLS) {
    const known = functions.find((t) => t.name === name);
    if (known) return known;
  }
  return (
    functions.find((t) => /shell|exec|bash/i.test(t.name) && !/kill|output|stdin/i.test(t.name)) ??
    tools.find((t) => t.kind === 'local_shell') ??
    tools.find((t) => t.kind === 'code_mode')
  );
}

/**
 * The arguments for a shell tool, shaped by its schema: an argv array (codex's `shell`) or a string
 * (`command`, `cmd`), a description when it takes one, and the smallest value for anything else it requires.
 */
export function shellArgs(schema: unknown, command: string, timeoutMs?: number): Record<string, unknown> {
  const props = fields(fields(schema).properties);
  const required = list(fields(schema).required).filter((r): r is string => typeof r === 'string');
  const key = 'command' in props ? 'command' : 'cmd' in props ? 'cmd' : (required.find((r) => typeOf(props[r]) === 'string') ?? 'command');
  const args: Record<string, unknown> = { [key]: typeOf(props[key]) === 'array' ? ['bash', '-lc', command] : command };
  if ('description' in props) args.description = 'Write the stand-in proof file';
  // A long step (an install under emulation) asks for the tool's longest time, where it takes one (claude-code's Bash: ms).
  if (timeoutMs !== undefined && 'timeout' in props) args.timeout = timeoutMs;
  for (const r of required) if (!(r in args)) args[r] = minimalValue(props[r]);
  return args;
}

/** The smallest value a JSON schema (or Gemini's upper-case dialect of it) accepts, for structured output. */
export function minimalValue(schema: unknown): unknown {
  const s = fields(schema);
  if ('const' in s) return s.const;
  const choices = list(s.enum);
  if (choices.length > 0) return choices[0];
  const alternatives = list(s.anyOf).length > 0 ? list(s.anyOf) : list(s.oneOf);
  if (alternatives.length > 0) return minimalValue(alternatives[0]);
  switch (typeOf(s)) {
    case 'object': {
      const props = fields(s.properties);
      const out: Record<string, unknown> = {};
      for (const r of list(s.required)) if (typeof r === 'string') out[r] = minimalValue(props[r]);
      return out;
    }
    case 'array':
      return Array.from({ length: typeof s.minItems === 'number' ? s.minItems : 0 }, () => minimalValue(s.items));
    case 'number':
    case 'integer':
      return typeof s.minimum === 'number' ? s.minimum : 0;
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      return 'stand-in';
  }
}

function typeOf(schema: unknown): string | undefined {
  const t = fields(schema).type;
  const first = Array.isArray(t) ? t.find((x) => x !== 'null') : t;
  return typeof first === 'string' ? first.toLowerCase() : undefined;
}
