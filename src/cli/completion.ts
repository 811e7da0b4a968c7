import type { Command } from 'commander';

/** Every command path (words) with its options, from commander's own tree. */
function walk(cmd: Command, prefix: string[], out: Map<string, { subs: string[]; opts: string[] }>): void {
  out.set(prefix.join(' '), {
    subs: cmd.commands.map((c) => c.name()),
    opts: cmd.options.map((o) => o.long ?? o.short ?? '').filter(Boolean).concat('--help'),
  });
  for (const sub of cmd.commands) walk(sub, [...prefix, sub.name()], out);
}

/** A bash completion script: `source <(agentvm completion bash)` (zsh: with bashcompinit). */
export function bashCompletion(program: Command): string {
  const tree = new Map<string, { subs: string[]; opts: string[] }>();
  walk(program, [], tree);
  const cases = [...tree]
    .map(([path, { subs, opts }]) => `    "${path}") words="${[...subs, ...opts].join(' ')}" ;;`)
    .join('\n');
  return `# bash completion for agentvm
_agentvm() {
  local cur path="" i w words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "\${path:+$path }$w" in
${[...tree.keys()].filter(Boolean).map((p) => `      "${p}") path="${p}" ;;`).join('\n')}
    esac
  done
  case "$path" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _agentvm agentvm
`;
}
