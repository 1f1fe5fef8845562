package tap

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
)

// TestSetCarrier turns an up TAP's carrier off and on and reads it back as iproute2 shows it.
func TestSetCarrier(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mc")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns})
	if err := d.SetUp(true); err != nil {
		t.Fatal(err)
	}
	flags := func() []string {
		l, ok := taptest.ShowLink(t, ns, name)
		if !ok {
			t.Fatalf("%s gone", name)
		}
		return l.Flags
	}
	for _, tc := range []struct {
		on        bool
		want, not string
	}{{false, "NO-CARRIER", "LOWER_UP"}, {true, "LOWER_UP", "NO-CARRIER"}, {false, "NO-CARRIER", "LOWER_UP"}} {
		if err := d.SetCarrier(tc.on); err != nil {
			t.Fatalf("SetCarrier(%v): %v", tc.on, err)
		}
		if f := flags(); !slices.Contains(f, tc.want) || slices.Contains(f, tc.not) {
			t.Errorf("carrier %v: flags %v, want %s and not %s", tc.on, f, tc.want, tc.not)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetCarrier(true); !errors.Is(err, unix.ENODEV) {
		t.Errorf("SetCarrier after Close: %v, want ENODEV", err)
	}
}
