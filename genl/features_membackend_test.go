package genl

import (
	"context"
	"fmt"
	"slices"
)

// Features of a MemDev: a driver whose active features are wanted ∩ HW.
func (b *MemBackend) Features(ctx context.Context, c Caller, d Device) (Features, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return Features{}, err
	}
	return m.Features, nil
}

func (b *MemBackend) SetFeatures(ctx context.Context, c Caller, d Device, u Update[Features]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	return memUpdate(b, m, &m.Features, u, func(f Features) string { return fmt.Sprintf("SetFeatures %s %v", d.Name, f.Wanted) },
		func(f Features) Features {
			f.Active = slices.DeleteFunc(slices.Clone(f.Wanted), func(n string) bool { return !slices.Contains(f.HW, n) })
			return f
		},
		func(f Features) string { return fmt.Sprintf("features %s %v", d.Name, f.Active) })
}
