package pagepool

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestNewConfigValidation(t *testing.T) {
	mem := NewMemory(0)
	good := func() Config {
		return Config{Mem: mem, PageBytes: 65536, BufSize: 2112, FragCount: 31, Name: "eth0/rx3"}
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // substring naming the problem; "" = valid
	}{
		{"valid fragment 64K x31", func(*Config) {}, ""},
		{"valid fragment 4K x2", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 1856, 2 }, ""},
		{"valid full page", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 4096, 1 }, ""},
		{"valid jumbo order 2", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 16384, 16384, 1 }, ""},
		{"valid exact fill", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 2048, 2 }, ""},
		{"valid max page", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = MaxPageBytes, MaxPageBytes, 1 }, ""},
		{"valid ring 1", func(c *Config) { c.ReturnRingSize = 1 }, ""},
		{"valid ring max", func(c *Config) { c.ReturnRingSize = MaxReturnRingSize }, ""},
		{"nil Mem", func(c *Config) { c.Mem = nil }, "Mem"},
		{"zero PageBytes", func(c *Config) { c.PageBytes = 0 }, "PageBytes"},
		{"negative PageBytes", func(c *Config) { c.PageBytes = -4096 }, "PageBytes"},
		{"huge PageBytes", func(c *Config) { c.PageBytes = MaxPageBytes + 1 }, "PageBytes"},
		{"zero FragCount", func(c *Config) { c.FragCount = 0 }, "FragCount"},
		{"negative FragCount", func(c *Config) { c.FragCount = -1 }, "FragCount"},
		{"zero BufSize", func(c *Config) { c.BufSize = 0 }, "BufSize"},
		{"negative BufSize", func(c *Config) { c.BufSize = -64 }, "BufSize"},
		{"frags overflow page", func(c *Config) { c.FragCount = 32 }, "exceeds PageBytes"},
		{"frags overflow 4K", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 2112, 2 }, "exceeds PageBytes"},
		{"int overflow in product", func(c *Config) { c.BufSize, c.FragCount = 1<<40, 1<<30 }, "exceeds PageBytes"},
		{"full page smaller buffer", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 1856, 1 }, "full-page mode"},
		{"full page larger buffer", func(c *Config) { c.PageBytes, c.BufSize, c.FragCount = 4096, 8192, 1 }, "full-page mode"},
		{"negative ring", func(c *Config) { c.ReturnRingSize = -1 }, "ReturnRingSize"},
		{"ring too big", func(c *Config) { c.ReturnRingSize = MaxReturnRingSize + 1 }, "ReturnRingSize"},
		{"negative ReleaseInterval", func(c *Config) { c.ReleaseInterval = -time.Second }, "ReleaseInterval"},
		{"negative StallWarn", func(c *Config) { c.StallWarn = -time.Second }, "StallWarn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.mutate(&cfg)
			p, err := New(cfg)
			if tc.wantErr == "" {
				require.NoError(t, err, "New")
				require.Equal(t, 0, p.Stats().Pages, "New allocated pages")
				require.Equal(t, int64(0), mem.InUse(), "New allocated pages")
				return
			}
			require.ErrorIs(t, err, unix.EINVAL, "New = %v, want EINVAL", err)
			require.Nil(t, p, "New returned a pool with an error")
			require.Contains(t, err.Error(), tc.wantErr, "error %q does not mention", err)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	mem := NewMemory(0)
	logger := slog.New(slog.DiscardHandler)
	tests := []struct {
		ring, wantRing int
	}{
		{0, DefaultReturnRingSize}, {1, 1}, {2, 2}, {3, 4}, {1000, 1024}, {1024, 1024}, {1025, 2048},
	}
	for _, tc := range tests {
		p, err := New(Config{Mem: mem, PageBytes: 4096, BufSize: 4096, FragCount: 1, ReturnRingSize: tc.ring})
		require.NoError(t, err)
		c := p.Config()
		assert.Equal(t, tc.wantRing, c.ReturnRingSize, "ReturnRingSize %d", tc.ring)
		assert.Same(t, slog.Default(), c.Logger, "defaults not filled: %+v", c)
		assert.Equal(t, DefaultReleaseInterval, c.ReleaseInterval, "defaults not filled: %+v", c)
		assert.Equal(t, DefaultStallWarn, c.StallWarn, "defaults not filled: %+v", c)
		assert.Len(t, p.ring.slots, tc.wantRing, "ring has %d slots, want %d", len(p.ring.slots), tc.wantRing)
	}
	p, err := New(Config{Mem: mem, PageBytes: 4096, BufSize: 4096, FragCount: 1, Logger: logger,
		ReleaseInterval: time.Millisecond, StallWarn: 2 * time.Millisecond})
	require.NoError(t, err)
	c := p.Config()
	assert.Same(t, logger, c.Logger, "explicit settings not kept: %+v", c)
	assert.Equal(t, time.Millisecond, c.ReleaseInterval, "explicit settings not kept: %+v", c)
	assert.Equal(t, 2*time.Millisecond, c.StallWarn, "explicit settings not kept: %+v", c)
	assert.Same(t, mem, c.Mem, "explicit settings not kept: %+v", c)
}
