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
)

// TestManPage: gen-man writes manactl.8, a man page with the usual sections, one subsection per
// command (every command --help knows), every global option and the exit-status table; man(1)
// renders it without a warning when it is installed.
func TestManPage(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := runCLI(t, "", "gen-man", dir); code != exitOK || out != "" || errs != "" {
		t.Fatalf("gen-man: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manactl.8"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.HasPrefix(page, ".nh\n.TH \"MANACTL\" \"8\" ") {
		t.Errorf("page starts %q", page[:min(len(page), 80)])
	}
	for _, sh := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"} {
		if !strings.Contains(page, "\n.SH "+sh+"\n") {
			t.Errorf("no .SH %s", sh)
		}
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
			if !strings.Contains(page, "\n.SS "+sub.CommandPath()+" ") && !strings.Contains(page, "\n.SS "+sub.CommandPath()+"\n") {
				t.Errorf("no .SS for %q", sub.CommandPath())
			}
			visit(sub)
		}
	}
	visit(root)
	if got := strings.Count(page, "\n.SS "); got != n || n < 18 {
		t.Errorf("%d .SS subsections for %d commands", got, n)
	}
	for _, want := range []string{"--json", "--kernel", "--socket", "--version", "--netns", "MANAD_SOCKET"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, e := range exitStatuses {
		if e.status != exitFailure && !strings.Contains(page, fmt.Sprintf("%s\\fP: %d when", e.cmd, e.status)) {
			t.Errorf("EXIT STATUS lacks %s's %d", e.cmd, e.status)
		}
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed")
	}
	cmd := exec.Command("man", "--warnings", "-l", filepath.Join(dir, "manactl.8"))
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "LC_ALL=C.UTF-8")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() != 0 || !strings.Contains(out.String(), "manactl set-ring DEV PARAM VALUE") {
		t.Errorf("man -l: %v, stderr %q\n%s", err, errb.String(), out.String())
	}
}
