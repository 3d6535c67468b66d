/**
 * `oscar completion bash|zsh|fish`: shell completion generated from the command table itself, so
 * it never lists a command or flag that does not exist (nor misses a new one). Pure: the program
 * in, the script out.
 */
import type { Command } from 'commander';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface Node {
  /** "rollout status": the words after `oscar` that name the command. */
  path: string[];
  description: string;
  subcommands: string[];
  flags: {
    long?: string;
    short?: string;
    description: string;
    /** The flag takes a value (a file name unless it has choices). */
    value: boolean;
    choices?: readonly string[];
  }[];
}

/** Every command of the program, depth first, with its flags (help and version included). */
export function commandTree(program: Command): Node[] {
  const out: Node[] = [];
  const visit = (command: Command, path: string[]): void => {
    const options = command.options;
    out.push({
      path,
      description: command.description(),
      subcommands: command.commands.map((c) => c.name()),
      flags: [
        ...options.map((o) => ({
          ...(o.long ? { long: o.long } : {}),
          ...(o.short ? { short: o.short } : {}),
          description: o.description,
          value: o.required || o.optional,
          ...(o.argChoices ? { choices: o.argChoices } : {}),
        })),
        { long: '--help', short: '-h', description: 'display help', value: false },
      ],
    });
    for (const sub of command.commands) visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return out;
}

const flagWords = (n: Node): string[] =>
  n.flags.flatMap((f) => [f.long, f.short].filter((x): x is string => x !== undefined));

/** bash: the deepest command named so far picks the words offered; else a file name. */
function bash(name: string, nodes: readonly Node[]): string {
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}_completion`;
  const known = nodes
    .filter((n) => n.path.length > 0)
    .map((n) => `      "${n.path.join(' ')}") path="${n.path.join(' ')}" ;;`)
    .join('\n');
  const cases = nodes
    .map(
      (n) =>
        `    "${n.path.join(' ')}") subs="${n.subcommands.join(' ')}"; flags="${flagWords(n).join(' ')}" ;;`,
    )
    .join('\n');
  return `# ${name} completion for bash: source <(${name} completion bash)
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" word i subs="" flags=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    [[ "$word" == -* ]] && continue
    case "\${path:+$path }$word" in
${known}
    esac
  done
  case "$path" in
${cases}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F ${fn} ${name}
`;
}

/** zsh runs the bash function through bashcompinit: one script to keep right, not two. */
function zsh(name: string, nodes: readonly Node[]): string {
  return `#compdef ${name}
# ${name} completion for zsh: source <(${name} completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bash(name, nodes)}`;
}

const fishQuote = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** fish: one `complete` line per command and flag, each under the condition of its parent. */
function fish(name: string, nodes: readonly Node[]): string {
  const lines = [`# ${name} completion for fish: ${name} completion fish | source`];
  lines.push(`complete -c ${name} -f`);
  const seen = (path: string[]): string =>
    path.length === 0
      ? '__fish_use_subcommand'
      : `__fish_seen_subcommand_from ${path[path.length - 1] ?? ''}`;
  for (const n of nodes) {
    const parent = nodes.find((p) => p.path.join(' ') === n.path.slice(0, -1).join(' '));
    if (n.path.length > 0 && parent) {
      const cond =
        n.path.length === 1
          ? '__fish_use_subcommand'
          : `${seen(n.path.slice(0, -1))}; and not __fish_seen_subcommand_from ${parent.subcommands.join(' ')}`;
      lines.push(
        `complete -c ${name} -n ${fishQuote(cond)} -a ${n.path[n.path.length - 1] ?? ''} -d ${fishQuote(n.description)}`,
      );
    }
    for (const f of n.flags) {
      const parts = [`complete -c ${name}`, `-n ${fishQuote(seen(n.path))}`];
      if (f.long) parts.push(`-l ${f.long.replace(/^--/, '')}`);
      if (f.short) parts.push(`-s ${f.short.replace(/^-/, '')}`);
      if (f.choices) parts.push(`-xa ${fishQuote(f.choices.join(' '))}`);
      else if (f.value) parts.push('-rF');
      parts.push(`-d ${fishQuote(f.description)}`);
      lines.push(parts.join(' '));
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(program: Command, shell: Shell): string {
  const nodes = commandTree(program);
  const name = program.name();
  if (shell === 'bash') return bash(name, nodes);
  if (shell === 'zsh') return zsh(name, nodes);
  return fish(name, nodes);
}
