package nsrun

import (
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"

	"github.com/manad/manad/internal/testenv"
)

func TestName(t *testing.T) {
	assert.True(t, strings.HasPrefix(Name("ab", "x"), "ab"))
	assert.True(t, strings.HasSuffix(Name("ab", "x"), "x"))
	assert.Len(t, Name("a-long-prefix-", "-and-suffix"), 15)
	assert.Equal(t, Name("p", "s"), Name("p", "s"), "unique to the process, stable within it")
}

// TestIn: code, a command and sockets run inside a fresh namespace (which has only lo, down
// until set up), and the calling thread is left in its own namespace.
func TestIn(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ip")
	ns := Name("nsr", "")
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })

	here, err := netns.Get()
	require.NoError(t, err)
	defer here.Close()
	var inside netns.NsHandle
	require.NoError(t, In(ns, func() (err error) {
		inside, err = netns.Get()
		return err
	}))
	defer inside.Close()
	assert.False(t, here.Equal(inside), "f ran in the namespace")
	now, err := netns.Get()
	require.NoError(t, err)
	defer now.Close()
	assert.True(t, here.Equal(now), "this thread stayed home")

	assert.ErrorContains(t, In("no-such-ns-"+Name("", ""), func() error { return nil }), "netns")

	_, err = Output(ns, "ip", "link", "set", "lo", "up")
	require.NoError(t, err)
	links, err := Output(ns, "ip", "-o", "link", "show")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(links, "\n"), "only lo: %s", links)
	_, err = Output(ns, "false")
	assert.Error(t, err)

	l, err := Listen(ns, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := Dial(ns, "tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "hi", string(b))

	pc, err := ListenPacket(ns, "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	uc, err := Dial(ns, "udp", pc.LocalAddr().String())
	require.NoError(t, err)
	defer uc.Close()
	_, err = uc.Write([]byte("datagram"))
	require.NoError(t, err)
	buf := make([]byte, 16)
	n, _, err := pc.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "datagram", string(buf[:n]))
}
