package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/faultpoint"
)

// TestFaultHelpAndCompletion: fault's usage, help and completion list every declared fault
// point, its driver step and default errno, and completion offers the modes after the point.
func TestFaultHelpAndCompletion(t *testing.T) {
	code, out, errs := runCLI(t, "", "fault", "--help")
	require.Equal(t, exitOK, code, "stderr %q", errs)
	assert.Contains(t, out, "manactl fault DEV "+strings.Join(faultpoint.Names(), "|")+" once|N|always|off")
	for _, p := range faultpoint.Points {
		d := p.Decl()
		assert.Contains(t, out, "\n  "+d.Name+" ", "help has no line for %s", d.Name)
		assert.Contains(t, out, "("+d.Mirrors+"), by default with "+unix.ErrnoName(d.Errno), "help of %s", d.Name)
	}
	for _, line := range strings.Split(faultPointHelp(), "\n") {
		assert.LessOrEqual(t, len(line), 80, "help line too long: %q", line)
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"fault", "eth0", ""}, faultpoint.Names()},
		{[]string{"fault", "eth0", "attach", ""}, []string{"once", "always", "off"}},
		{[]string{"fault", "eth0", "attach", "once", ""}, nil},
	} {
		code, out, _ := runCLI(t, sock, append([]string{"__complete"}, tc.args...)...)
		require.Equal(t, 0, code, "__complete %q:\n%s", tc.args, out)
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
				got = append(got, l)
			}
		}
		assert.Equal(t, tc.want, got, "__complete %q", tc.args)
	}
}
