// Package epollinfo reads which descriptors this process's epoll instances hold, and with which
// events, from /proc/self/fdinfo: what tests of the data path's and the uplinks' parkers check
// (a polled descriptor must sit in no epoll that would wake a thread).
package epollinfo

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Entry is one descriptor registered in an epoll instance of this process.
type Entry struct {
	EPFD, TFD int    // the epoll instance's descriptor and the registered one
	Events    uint32 // the events the entry waits for (EPOLLIN …)
}

// Entries lists the entries of every epoll instance this process has open (the runtime's
// netpoller among them). An instance closed while it is read is skipped. Errors: reading
// /proc/self/fd, or an fdinfo line that does not parse (a kernel whose format changed).
func Entries() ([]Entry, error) {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		if link, err := os.Readlink("/proc/self/fd/" + de.Name()); err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		epfd, _ := strconv.Atoi(de.Name())
		b, err := os.ReadFile("/proc/self/fdinfo/" + de.Name())
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			// tfd:        7 events:       19 data:                7  pos:0 ino:… sdev:…
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || fs[0] != "tfd:" || fs[2] != "events:" {
				continue
			}
			tfd, err1 := strconv.Atoi(fs[1])
			ev, err2 := strconv.ParseUint(fs[3], 16, 32)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("epollinfo: fdinfo of %d: %q does not parse", epfd, sc.Text())
			}
			out = append(out, Entry{EPFD: epfd, TFD: tfd, Events: uint32(ev)})
		}
	}
	return out, nil
}
