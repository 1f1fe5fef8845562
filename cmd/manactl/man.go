package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/manad/manad/cmd/internal/buildinfo"
)

// The manual page manactl(8) is generated from the command tree: the root's and every
// command's Short, Long, usage, flags and examples, so --help and the manual say the same. It is
// one page with a section per command (cobra/doc's GenMan would make one page per command),
// written in markdown and rendered by cobra/doc's renderer, go-md2man.

// GenMan is a top-level command (see topLevel).
func (t topLevel) GenMan() *cobra.Command { return genManCmd(t.app) }

func genManCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "gen-man DIR",
		Short:   "Write the manual page manactl.8 into DIR (make man)",
		Example: "  manactl gen-man bin/",
		Hidden:  true,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b bytes.Buffer
			if err := writeManPage(&b, cmd.Root(), buildinfo.Date()); err != nil {
				return failed(err)
			}
			return failed(os.WriteFile(filepath.Join(args[0], "manactl.8"), b.Bytes(), 0o644))
		},
	}
}

// writeManPage writes manactl(8) in roff for the command tree under root.
func writeManPage(w io.Writer, root *cobra.Command, date time.Time) error {
	var md bytes.Buffer
	fmt.Fprintf(&md, "%% \"MANACTL\" \"8\" \"%s\" \"manad\" \"System Manager's Manual\"\n", date.Format("January 2006"))
	fmt.Fprintf(&md, "# NAME\nmanactl - %s\n\n", mdEscape(strings.ToLower(root.Short[:1])+root.Short[1:]))
	md.WriteString("# SYNOPSIS\n**manactl** [**--json**] [**--kernel**] [**--socket** *PATH*] *COMMAND* [*ARG*...]\n\n" +
		"**manactl** [*GLOBAL-OPTIONS*] *ETHTOOL-OPTION* *DEV* [*ARG*...]\n\n**manactl** **--version**\n\n")
	fmt.Fprintf(&md, "# DESCRIPTION\n%s\n\n", mdEscape(root.Long))
	md.WriteString("# OPTIONS\n")
	writeMDFlags(&md, root.PersistentFlags())
	md.WriteString("**-v**, **--version**\n: print the version (module version, VCS revision and time, Go version) and exit\n\n")
	md.WriteString("# COMMANDS\n")
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.Name() == "help" {
				continue
			}
			if sub.Name() == "completion" { // cobra's, with its own markdown-unfriendly help
				md.WriteString("### manactl completion bash|zsh|fish|powershell\nPrint the shell's completion script " +
					"(cobra's); see **manactl completion** *SHELL* **--help**.\n\n")
				continue
			}
			writeMDCommand(&md, sub)
			visit(sub)
		}
	}
	visit(root)
	md.WriteString("# EXIT STATUS\n")
	writeExitStatuses(&md)
	md.WriteString("\n# ENVIRONMENT\n**MANAD_SOCKET**\n: manad's control socket when **--socket** is not given (default */run/manad/manad.sock*)\n\n")
	md.WriteString("# SEE ALSO\n**manad**(8), **manad.toml**(5), **ethtool**(8), **ip-netns**(8)\n")
	_, err := w.Write(md2man.Render(md.Bytes()))
	return err
}

// writeMDCommand writes one command's section.
func writeMDCommand(md *bytes.Buffer, c *cobra.Command) {
	fmt.Fprintf(md, "### %s\n%s.\n\n", mdEscape(strings.TrimSuffix(c.UseLine(), " [flags]")), mdEscape(c.Short))
	if c.Long != "" {
		fmt.Fprintf(md, "%s\n\n", mdEscape(c.Long))
	}
	var aliases []string
	for _, o := range ethtoolAliases(c) {
		aliases = append(aliases, "**"+mdEscape(o)+"**")
	}
	for _, al := range c.Aliases {
		aliases = append(aliases, "**"+mdEscape(al)+"**")
	}
	if len(aliases) > 0 {
		slices.Sort(aliases)
		fmt.Fprintf(md, "Also: %s.\n\n", strings.Join(aliases, ", "))
	}
	writeMDFlags(md, c.LocalNonPersistentFlags())
	if c.Example != "" {
		fmt.Fprintf(md, "Examples:\n\n```\n%s\n```\n\n", c.Example)
	}
}

// writeMDFlags writes flags as a definition list.
func writeMDFlags(md *bytes.Buffer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		term := "**--" + mdEscape(f.Name) + "**"
		if f.Shorthand != "" {
			term = "**-" + f.Shorthand + "**, " + term
		}
		// The value's name: `NAME` in the usage, else N for a number, else the flag's name.
		name, usage := pflag.UnquoteUsage(f)
		switch {
		case name == "":
		case strings.Contains(f.Usage, "`"):
		case strings.HasPrefix(name, "int") || strings.HasPrefix(name, "uint"):
			name = "n"
		default:
			name = f.Name[strings.LastIndexByte(f.Name, '-')+1:]
		}
		if name != "" {
			term += " *" + mdEscape(strings.ToUpper(name)) + "*"
		}
		fmt.Fprintf(md, "%s\n: %s\n\n", term, mdEscape(usage))
	})
}

// mdEscape escapes markdown's punctuation in s, so that prose reads as written: "ETH_SS_*",
// "<message>", a line starting with "--netns".
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()#+-.!:|&<>~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
