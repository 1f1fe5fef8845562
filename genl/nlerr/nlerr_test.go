package nlerr

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// extacker is an error from another package that carries an extack message the way
// daemon/config's positioned errors do.
type extacker struct{ msg string }

func (e extacker) Error() string         { return "file:3: " + e.msg }
func (e extacker) ExtackMessage() string { return e.msg }
func (e extacker) Unwrap() error         { return unix.ERANGE }

func TestError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
		msg   string
		text  string
	}{
		{"new", New(unix.EINVAL, "rx:%d less than the min:%d", 64, 128), unix.EINVAL,
			"rx:64 less than the min:128", "rx:64 less than the min:128: invalid argument"},
		{"errorf", Errorf(unix.ENODEV, "no device matches name"), unix.ENODEV,
			"no device matches name", "no device matches name: no such device"},
		{"wrap bare errno", Wrap(fmt.Errorf("page: %w", unix.ENOMEM), unix.EIO, "Insufficient memory for new MTU"), unix.ENOMEM,
			"Insufficient memory for new MTU", "Insufficient memory for new MTU: cannot allocate memory"},
		{"wrap an Error", Wrap(New(unix.EPROTO, "injected attach fault"), unix.EIO, "mana_attach failed"), unix.EPROTO,
			"mana_attach failed: injected attach fault", "mana_attach failed: injected attach fault: protocol error"},
		{"wrap an ExtackMessage", Wrap(extacker{"bad size"}, unix.EIO, "load"), unix.ERANGE,
			"load: bad size", "load: bad size: numerical result out of range"},
		{"wrap plain", Wrap(errors.New("boom"), unix.EIO, "detach"), unix.EIO, "detach", "detach: input/output error"},
		{"wrapped in fmt", fmt.Errorf("port a: %w", New(unix.EBUSY, "busy")), unix.EBUSY, "busy", "port a: busy: device or resource busy"},
		{"errno only", &Error{Errno: unix.EPERM}, unix.EPERM, "", "operation not permitted"},
		{"offset", &Error{Errno: unix.EINVAL, Message: "requested channel count exceeds maximum", Offset: 32}, unix.EINVAL,
			"requested channel count exceeds maximum", "requested channel count exceeds maximum (offset 32): invalid argument"},
		{"offset without message", &Error{Errno: unix.EINVAL, Offset: 20}, unix.EINVAL, "", "(offset 20): invalid argument"},
		{"missing attribute", &Error{Errno: unix.EINVAL, MissType: 1, MissNest: 20}, unix.EINVAL, "", "(missing attribute 1): invalid argument"},
		{"everything", &Error{Errno: unix.ERANGE, Message: "out of range", Offset: 24, MissType: 3, Policy: []byte{8, 0, 1, 0, 3, 0, 0, 0}}, unix.ERANGE,
			"out of range", "out of range (offset 24) (missing attribute 3): numerical result out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.err, tc.errno)
			var errno unix.Errno
			require.ErrorAs(t, tc.err, &errno)
			assert.Equal(t, tc.errno, errno)
			var e *Error
			require.ErrorAs(t, tc.err, &e)
			assert.Equal(t, tc.msg, e.ExtackMessage())
			assert.Equal(t, tc.msg, e.Message)
			assert.EqualError(t, tc.err, tc.text)
		})
	}
	assert.NoError(t, Wrap(nil, unix.EIO, "x"))
	// The errno's own Is holds through the Error: ENOENT is fs.ErrNotExist.
	assert.ErrorIs(t, New(unix.ENOENT, "no such segment"), fs.ErrNotExist)
	assert.NotErrorIs(t, New(unix.EINVAL, "x"), unix.ENOENT)
}
