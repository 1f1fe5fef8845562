package extack

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

func TestError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
		msg   string
		text  string
	}{
		{"new", New(unix.EINVAL, "rx:%d less than the min:%d", 64, 128), unix.EINVAL, "rx:64 less than the min:128", "rx:64 less than the min:128: invalid argument"},
		{"wrap bare errno", Wrap(fmt.Errorf("page: %w", unix.ENOMEM), unix.EIO, "Insufficient memory for new MTU"), unix.ENOMEM, "Insufficient memory for new MTU", "Insufficient memory for new MTU: cannot allocate memory"},
		{"wrap extack", Wrap(New(unix.EPROTO, "injected attach fault"), unix.EIO, "mana_attach failed"), unix.EPROTO, "mana_attach failed: injected attach fault", "mana_attach failed: injected attach fault: protocol error"},
		{"wrap plain", Wrap(errors.New("boom"), unix.EIO, "detach"), unix.EIO, "detach", "detach: input/output error"},
		{"no message", &Error{Errno: unix.EPERM}, unix.EPERM, "", "operation not permitted"},
		{"offset", &Error{Errno: unix.EINVAL, Message: "bad size", Offset: 36}, unix.EINVAL, "bad size", "bad size: invalid argument (offset 36)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.errno) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.errno)
			}
			var e *Error
			if !errors.As(tc.err, &e) || e.ExtackMessage() != tc.msg {
				t.Errorf("message = %q, want %q", e.ExtackMessage(), tc.msg)
			}
			if tc.err.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.text)
			}
		})
	}
	if Wrap(nil, unix.EIO, "x") != nil {
		t.Error("Wrap(nil) != nil")
	}
}
