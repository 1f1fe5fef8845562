package config

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorIsExtack: every kind of config error carries the one "errno plus message" type, so a
// config error that reaches a netlink reply has its errno and the file's text without the file
// and line: a file problem (File/Line kept), several (the first), a corrupt and a newer state
// file, and a rule broken by a request (no file at all, printed as extack prints).
func TestErrorIsExtack(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(`{"version": 9}`), 0o600))
	_, newer := LoadState(dir)
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(`{"version": 1, "ports": 3}`), 0o600))
	_, corrupt := LoadState(dir)
	_, one := Parse("t.toml", []byte("[[port]]\nname = \"eth0\"\nspeed = -1\n"))
	_, many := Parse("t.toml", []byte("[[port]]\nname = \"eth0\"\nmtu = 1\nrx_ring = 1\n"))
	spec := DefaultPortSpec("eth0")
	spec.Speed = -1
	rule := spec.Validate()
	_, alloc := ParseRxAlloc("eth0", "slab")

	speed := `port "eth0": speed -1 out of range 0..2147483647 (Mb/s, 0 = unknown)`
	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
		msg   string
		text  string // Error()
		line  int    // of the *Error, 0 for none
		also  error  // errors.Is target besides the errno
	}{
		{"file", one, unix.EINVAL, speed, "t.toml:3: " + speed, 3, nil},
		{"several", many, unix.EINVAL, `port "eth0": mtu 1 less than the minimum 68`, "", 3, nil},
		{"request", rule, unix.EINVAL, speed, speed + ": invalid argument", 0, nil},
		{"rx_alloc", alloc, unix.EINVAL, `port "eth0": unknown rx_alloc "slab" (want page-pool-frag, page-pool-page or no-pool)`, "", 0, nil},
		{"corrupt state", corrupt, unix.EBADMSG, "", "", 1, nil},
		{"newer state", newer, unix.ENOTSUP, "version 9 was written by a newer manad (this one reads version 1)", "", 0, ErrStateNewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var xe *nlerr.Error
			require.ErrorAs(t, tc.err, &xe, "%v: errors.As(*nlerr.Error) = %+v; want errno %v", tc.err, xe, tc.errno)
			require.Equal(t, tc.errno, xe.Errno, "%v: errors.As(*nlerr.Error) = %+v; want errno %v", tc.err, xe, tc.errno)
			require.ErrorIs(t, tc.err, tc.errno, "%v: errors.As(*nlerr.Error) = %+v; want errno %v", tc.err, xe, tc.errno)
			if tc.msg != "" {
				assert.Equal(t, tc.msg, xe.Message, "extack message")
			}
			if tc.text != "" {
				assert.Equal(t, tc.text, tc.err.Error(), "Error()")
			}
			var ce *Error
			if !errors.As(tc.err, &ce) || ce.Line != tc.line || ce.Msg != xe.Message {
				t.Errorf("errors.As(*Error) = %+v; want line %d and the extack's message", ce, tc.line)
			}
			if tc.also != nil {
				assert.ErrorIs(t, tc.err, tc.also, "errors.Is(%v, %v) = false", tc.err, tc.also)
			}
		})
	}
}
