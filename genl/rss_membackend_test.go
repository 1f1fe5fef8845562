package genl

import (
	"context"
)

var _ RSSBackend = (*MemBackend)(nil)

// RSS answers as mana_get_rxfh for a 4-queue port: Toeplitz, a 40-byte key, 64 entries.
func (b *MemBackend) RSS(ctx context.Context, c Caller, d Device) (RSS, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.port(c, d); err != nil {
		return RSS{}, err
	}
	r := RSS{HFunc: 1, Indir: make([]uint32, 64), HKey: make([]byte, 40)}
	for i := range r.Indir {
		r.Indir[i] = uint32(i % 4)
	}
	for i := range r.HKey {
		r.HKey[i] = byte(i)
	}
	return r, nil
}
