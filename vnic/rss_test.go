package vnic

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCheckRSS(t *testing.T) {
	ok := make([]uint32, RSSIndirSize)
	high := make([]uint32, RSSIndirSize)
	high[63] = 4 // port has 4 queues: 0..3
	edge := make([]uint32, RSSIndirSize)
	edge[0] = 3
	for _, c := range []struct {
		name string
		u    RSSUpdate
		want error
	}{
		{"nothing", RSSUpdate{}, nil},
		{"toeplitz", RSSUpdate{HFunc: RSSHashTop}, nil},
		{"xor", RSSUpdate{HFunc: 2}, unix.EOPNOTSUPP},
		{"crc32", RSSUpdate{HFunc: 4}, unix.EOPNOTSUPP},
		{"key", RSSUpdate{Key: make([]byte, RSSKeySize)}, nil},
		{"short key", RSSUpdate{Key: make([]byte, RSSKeySize-1)}, unix.EINVAL},
		{"long key", RSSUpdate{Key: make([]byte, RSSKeySize+1)}, unix.EINVAL},
		{"table", RSSUpdate{Indir: ok}, nil},
		{"last queue", RSSUpdate{Indir: edge}, nil},
		{"entry = queues", RSSUpdate{Indir: high}, unix.EINVAL},
		{"short table", RSSUpdate{Indir: ok[:RSSIndirSize-1]}, unix.EINVAL},
		{"long table", RSSUpdate{Indir: append(ok[:RSSIndirSize:RSSIndirSize], 0)}, unix.EINVAL},
	} {
		err := checkRSS(c.u, 4)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: checkRSS = %v, want %v", c.name, err, c.want)
		}
	}
}

// TestSetRSSSteers checks that frames land on the queue the user's table names under the user's
// key, and that a channel change restores the default table but keeps the key, as mana does.
func TestSetRSSSteers(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { s.Queues = 4 })
	tp.locked(func() {
		err := tp.SetRSS(RSSUpdate{})
		assert.ErrorIs(t, err, unix.EOPNOTSUPP, "SetRSS on a down port = %v, want EOPNOTSUPP", err)
	})
	tp.open()
	key := make([]byte, RSSKeySize)
	for i := range key {
		key[i] = byte(i*37 + 11)
	}
	indir := make([]uint32, RSSIndirSize)
	for i := range indir {
		indir[i] = uint32(3 - i%2) // only queues 3 and 2
	}
	tp.locked(func() {
		require.NoError(t, tp.SetRSS(RSSUpdate{HFunc: RSSHashTop, Key: key, Indir: indir}), "SetRSS")
		bad := append([]uint32(nil), indir...)
		bad[5] = 4
		err := tp.SetRSS(RSSUpdate{Key: make([]byte, RSSKeySize), Indir: bad})
		assert.ErrorIs(t, err, unix.EINVAL, "SetRSS(entry 4) = %v, want EINVAL", err)
		got := tp.RSS()
		if string(got.Key[:]) != string(key) || got.Indir[5] != indir[5] {
			t.Error("a refused SetRSS changed the configuration")
		}
	})
	var k [RSSKeySize]byte
	copy(k[:], key)
	var buf [36]byte
	hits := map[int]int{}
	for sport := uint16(1000); sport < 1100; sport++ {
		f := udpFrame(100, sport, 5201)
		want := int(indir[Toeplitz(&k, flowHashInput(f, &buf))%RSSIndirSize])
		q := tp.SteerRx(f)
		require.Equal(t, want, q, "flow %d steered to queue %d, the table names %d", sport, q, want)
		require.Equal(t, RxDelivered, tp.Receive(q, f), "Receive")
		hits[q]++
	}
	if hits[2]+hits[3] != 100 || hits[2] == 0 || hits[3] == 0 {
		t.Errorf("flows per queue %v, want all on 2 and 3", hits)
	}
	n := tp.stat("rx_2_packets") + tp.stat("rx_3_packets")
	assert.Equal(t, uint64(100), n, "queues 2 and 3 received %d of 100 frames", n)

	tp.locked(func() {
		require.NoError(t, tp.SetChannels(2), "SetChannels")
		got := tp.RSS()
		assert.Equal(t, k, got.Key, "the key did not survive the channel change")
		assert.Equal(t, defaultIndir(2), got.Indir, "table after the channel change = %v, want the default over 2 queues", got.Indir)
	})
	for sport := uint16(1000); sport < 1100; sport++ {
		f := udpFrame(100, sport, 5201)
		require.Equal(t, int(Toeplitz(&k, flowHashInput(f, &buf))%RSSIndirSize%2), tp.SteerRx(f), "after the channel change flow %d went to queue", sport)
	}
}
