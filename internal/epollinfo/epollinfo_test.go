package epollinfo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestEntries: a descriptor added to an epoll instance shows with its events, changes with
// EPOLL_CTL_MOD and is gone after EPOLL_CTL_DEL and after the instance is closed.
func TestEntries(t *testing.T) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	require.NoError(t, err)
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })

	find := func() (Entry, bool) {
		es, err := Entries()
		require.NoError(t, err)
		for _, e := range es {
			if e.EPFD == epfd && e.TFD == p[0] {
				return e, true
			}
		}
		return Entry{}, false
	}
	_, ok := find()
	assert.False(t, ok, "before EPOLL_CTL_ADD")

	for _, tc := range []struct {
		op     int
		events uint32
	}{
		{unix.EPOLL_CTL_ADD, unix.EPOLLIN},
		{unix.EPOLL_CTL_MOD, unix.EPOLLIN | unix.EPOLLRDHUP},
		{unix.EPOLL_CTL_MOD, 0},
	} {
		require.NoError(t, unix.EpollCtl(epfd, tc.op, p[0], &unix.EpollEvent{Events: tc.events}))
		e, ok := find()
		require.True(t, ok, "after op %d", tc.op)
		// The kernel adds EPOLLERR|EPOLLHUP to every entry (ep_insert, ep_modify).
		assert.Equal(t, tc.events, e.Events&^(unix.EPOLLERR|unix.EPOLLHUP), "op %d", tc.op)
	}
	require.NoError(t, unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, p[0], nil))
	_, ok = find()
	assert.False(t, ok, "after EPOLL_CTL_DEL")

	require.NoError(t, unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, p[0], &unix.EpollEvent{Events: unix.EPOLLIN}))
	require.NoError(t, unix.Close(epfd))
	_, ok = find()
	assert.False(t, ok, "after the instance is closed")
}
