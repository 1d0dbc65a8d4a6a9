package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/errs"
)

// The bash and zsh scripts ask the binary itself for the words that may come
// next (urfave/cli's --generate-bash-completion: commands, then flags after
// a "-"), so they follow the command tree of the installed version. They are
// urfave/cli's autocomplete scripts, for this program's name.
const bashCompletion = `# better-compute bash completion: source it, or put it in
# /etc/bash_completion.d/better-compute
_better_compute() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == "-"* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _better_compute better-compute
`

const zshCompletion = `#compdef better-compute
# better-compute zsh completion: put it on $fpath as _better-compute, or
# source it after compinit.
_better_compute() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _better_compute better-compute
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			var script string
			switch shell := c.Args().First(); shell {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				// fish completions are static: the command tree of this binary.
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				script = s
			default:
				return errs.Invalid("shell", "completion %q: want bash, zsh or fish", shell)
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}
