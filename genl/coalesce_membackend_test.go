package genl

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

func (b *MemBackend) Coalesce(ctx context.Context, c Caller, d Device) (Coalesce, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return Coalesce{}, err
	}
	return m.Coalesce, nil
}

// SetCoalesce checks rx-cqe-frames as mana_set_coalesce does (the rest of the driver's rules
// are vnic's, tested there), so that a driver refusal is seen to reach the client.
func (b *MemBackend) SetCoalesce(ctx context.Context, c Caller, d Device, u Update[Coalesce]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	next, mod, err := u.Apply(m.Coalesce)
	if err != nil || !mod {
		return err
	}
	if next.RxCQEFrames != 1 && next.RxCQEFrames != 4 {
		return Errorf(unix.EINVAL, "rx-frames must be 1 or 4, got %d", next.RxCQEFrames)
	}
	return memUpdate(b, m, &m.Coalesce, Update[Coalesce]{
		Apply:   func(Coalesce) (Coalesce, bool, error) { return next, true, nil },
		Changed: u.Changed,
	}, func(co Coalesce) string { return fmt.Sprintf("SetCoalesce %s %+v", d.Name, co) }, nil,
		func(co Coalesce) string { return fmt.Sprintf("coalesce %s %+v", d.Name, co) })
}
