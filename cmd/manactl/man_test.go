package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManPage: gen-man writes manactl.8, a man page with the usual sections, one subsection per
// command (every command --help knows), every global option and the exit-status table; man(1)
// renders it without a warning when it is installed.
func TestManPage(t *testing.T) {
	dir := t.TempDir()
	code, stdout, errs := runCLI(t, "", "gen-man", dir)
	require.Equal(t, exitOK, code, "gen-man: exit status; stderr %q", errs)
	require.Equal(t, "", stdout, "gen-man: stdout")
	require.Equal(t, "", errs, "gen-man: stderr")
	b, err := os.ReadFile(filepath.Join(dir, "manactl.8"))
	require.NoError(t, err)
	page := string(b)
	assert.True(t, strings.HasPrefix(page, ".nh\n.TH \"MANACTL\" \"8\" "), "page starts %q", page[:min(len(page), 80)])
	for _, sh := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"} {
		assert.Contains(t, page, "\n.SH "+sh+"\n", "no .SH %s", sh)
	}
	// One .SS per command, in the COMMANDS section.
	root := newRoot(&app{}, func(string) string { return "" })
	root.InitDefaultCompletionCmd() // as Execute does
	var visit func(c *cobra.Command)
	n := 0
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.Name() == "help" || c.Name() == "completion" {
				continue
			}
			n++
			if !strings.Contains(page, "\n.SS "+sub.CommandPath()+" ") {
				assert.Contains(t, page, "\n.SS "+sub.CommandPath()+"\n", "no .SS for %q", sub.CommandPath())
			}
			visit(sub)
		}
	}
	visit(root)
	got := strings.Count(page, "\n.SS ")
	assert.Equal(t, n, got, "%d .SS subsections for %d commands", got, n)
	assert.GreaterOrEqual(t, n, 18, "%d .SS subsections for %d commands", got, n)
	for _, want := range []string{"--json", "--kernel", "--socket", "--version", "--netns", "MANAD_SOCKET"} {
		assert.Contains(t, page, want, "page lacks")
	}
	for _, e := range exitStatuses {
		if e.status != exitFailure {
			assert.Contains(t, page, fmt.Sprintf("%s\\fP: %d when", e.cmd, e.status), "EXIT STATUS lacks %s's %d", e.cmd, e.status)
		}
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed")
	}
	cmd := exec.Command("man", "--warnings", "-l", filepath.Join(dir, "manactl.8"))
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "LC_ALL=C.UTF-8")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	assert.NoError(t, err, "man -l; stderr %q", errb.String())
	assert.Equal(t, "", errb.String(), "man -l: stderr")
	assert.Contains(t, out.String(), "manactl set-ring DEV PARAM VALUE", "man -l")
}
