package genl

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// rss returns m's RSS setting, first the default of mana_get_rxfh for a port of
// m.Channels.Combined queues: Toeplitz, a 40-byte key (0, 1, 2, ...), 64 entries round robin.
// Caller holds b.mu.
func (m *MemDev) rss() RSSSetting {
	if m.RSS.Indir == nil {
		q := max(m.Channels.Combined, 1)
		m.RSS = RSSSetting{RSS: RSS{HFunc: 1, Indir: make([]uint32, 64), HKey: make([]byte, 40)}, RxRings: q}
		for i := range m.RSS.Indir {
			m.RSS.Indir[i] = uint32(i) % q
		}
		for i := range m.RSS.HKey {
			m.RSS.HKey[i] = byte(i)
		}
	}
	v := m.RSS
	v.Indir, v.HKey = slices.Clone(v.Indir), slices.Clone(v.HKey)
	return v
}

// RSS answers as mana_get_rxfh.
func (b *MemBackend) RSS(ctx context.Context, c Caller, d Device) (RSS, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return RSS{}, err
	}
	return m.rss().RSS, nil
}

// SetRSS checks as mana_set_rxfh (Toeplitz only, entries below the queue count; without
// messages, as the driver) and stores the result; a plain device has no RSS at all.
func (b *MemBackend) SetRSS(ctx context.Context, c Caller, d Device, u Update[RSSSetting]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.find(c, d)
	if err != nil {
		return err
	}
	if !m.Port {
		if _, mod, err := u.Apply(RSSSetting{}); err != nil || !mod {
			return err
		}
		return unix.EOPNOTSUPP
	}
	cur := m.rss()
	next, mod, err := u.Apply(cur)
	if err != nil {
		return err
	}
	if !mod {
		m.RSS.Configured = next.Configured // the core's flag, without a driver call
		return nil
	}
	if next.HFunc != 0 && next.HFunc != 1 {
		return unix.EOPNOTSUPP
	}
	for _, q := range next.Indir {
		if q >= cur.RxRings {
			return unix.EINVAL
		}
	}
	hf := next.HFunc
	if hf == 0 {
		hf = cur.HFunc
	}
	next.HFunc = hf
	return memUpdate(b, m, &m.RSS, Update[RSSSetting]{
		Apply:   func(RSSSetting) (RSSSetting, bool, error) { return next, true, nil },
		Changed: u.Changed,
	}, func(v RSSSetting) string { return fmt.Sprintf("SetRSS %s %v %x", d.Name, v.Indir, v.HKey) }, nil,
		func(v RSSSetting) string { return fmt.Sprintf("rss %s %v %x", d.Name, v.Indir, v.HKey) })
}
