package faultpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// TestParse: every declared point parses from its name and back; other names give EINVAL and
// say which names exist.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Point
		errno   unix.Errno
		message string
	}{
		{in: "prealloc", want: Prealloc},
		{in: "detach", want: Detach},
		{in: "attach", want: Attach},
		{in: "nowhere", errno: unix.EINVAL, message: `unknown fault point "nowhere" (want prealloc, detach or attach)`},
		{in: "", errno: unix.EINVAL, message: `unknown fault point "" (want prealloc, detach or attach)`},
		{in: "Attach", errno: unix.EINVAL, message: `unknown fault point "Attach" (want prealloc, detach or attach)`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if tt.errno == 0 {
				require.NoError(t, err)
				assert.Equal(t, tt.want, p)
				assert.Equal(t, tt.in, p.String())
				return
			}
			var e *nlerr.Error
			if assert.ErrorAs(t, err, &e) {
				assert.Equal(t, tt.errno, e.Errno)
				assert.Equal(t, tt.message, e.Message)
			}
		})
	}
}

// TestDecls: every point is declared in full, under a name of its own, and Names and Points
// list them all in order.
func TestDecls(t *testing.T) {
	require.Len(t, Points, int(NumPoints))
	seen := map[string]bool{}
	for i, p := range Points {
		assert.Equal(t, Point(i), p)
		d := p.Decl()
		assert.NotEmpty(t, d.Name, "point %d", i)
		assert.NotEmpty(t, d.Step, "%s: step", d.Name)
		assert.NotEmpty(t, d.Mirrors, "%s: mirrors", d.Name)
		assert.NotEmpty(t, d.Leaves, "%s: leaves", d.Name)
		assert.NotEmpty(t, d.Why, "%s: why", d.Name)
		assert.NotZero(t, d.Errno, "%s: errno", d.Name)
		assert.Equal(t, d.Errno, p.Errno())
		assert.False(t, seen[d.Name], "%s declared twice", d.Name)
		seen[d.Name] = true
		assert.Equal(t, d.Name, Names()[i])
	}
	assert.Equal(t, "point(3)", NumPoints.String())
	assert.Equal(t, Decl{}, NumPoints.Decl())
	assert.Equal(t, "prealloc, detach or attach", Alternatives())
}
