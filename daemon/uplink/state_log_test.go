package uplink

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSetStateLogsTransitions checks that the same failure, re-evaluated on every link event of
// the namespace, is logged once, and that a new error or a transition is logged again.
func TestSetStateLogsTransitions(t *testing.T) {
	var buf bytes.Buffer
	u := &Uplink{log: slog.New(slog.NewTextHandler(&buf, nil))}
	steps := []struct {
		state State
		err   string
		logs  bool
	}{
		{Failed, "packet socket: operation not permitted", true},
		{Failed, "packet socket: operation not permitted", false},
		{Failed, "packet socket: operation not permitted", false},
		{Failed, "packet socket: no buffer space available", true},
		{Down, "", true},
		{Down, "", false},
		{Absent, "", true},
		{Failed, "packet socket: operation not permitted", true},
	}
	for i, s := range steps {
		before := strings.Count(buf.String(), "\n")
		u.setState(s.state, 0, s.err)
		got := strings.Count(buf.String(), "\n") > before
		assert.Equal(t, s.logs, got, "step %d (%v %q): logged %v, want %v\n%s", i, s.state, s.err, got, s.logs, buf.String())
	}
	got := u.Status().Changes
	assert.Equal(t, uint64(4), got, "Changes = %d, want 4 (→Failed→Down→Absent→Failed)", got)
}
