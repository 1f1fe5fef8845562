package harness

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/manad/manad/internal/nsrun"
)

// Listen opens a listener on addr ("tcp", "10.0.0.2:5201") inside namespace ns (nsrun.Listen).
func Listen(ns, network, addr string) (net.Listener, error) { return nsrun.Listen(ns, network, addr) }

// ListenPacket opens a UDP socket on addr inside namespace ns (nsrun.ListenPacket).
func ListenPacket(ns, addr string) (net.PacketConn, error) { return nsrun.ListenPacket(ns, addr) }

// Dial connects from inside namespace ns (nsrun.Dial).
func Dial(ns, network, addr string) (net.Conn, error) { return nsrun.Dial(ns, network, addr) }

// Transfer is one TCP stream: the sender writes pseudo-random bytes until Stop (or Size bytes),
// the receiver hashes what arrives. Sum compares the two digests.
type Transfer struct {
	Sent, Received       int64
	SentSum, ReceivedSum [32]byte
	// SendErr and RecvErr are each written by one side only.
	SendErr, RecvErr error
	stop             chan struct{}
	done             chan struct{}
}

// StartTransfer starts a TCP stream from namespace src to addr (listening in dst); size 0 means
// "until Stop".
func StartTransfer(src, dst, addr string, size int64, seed uint64) (*Transfer, error) {
	l, err := Listen(dst, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tr := &Transfer{stop: make(chan struct{}), done: make(chan struct{})}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			tr.RecvErr = err
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		tr.Received = n
		copy(tr.ReceivedSum[:], h.Sum(nil))
		if err != nil {
			tr.RecvErr = fmt.Errorf("receive: %w", err)
		}
	}()
	c, err := Dial(src, "tcp", addr)
	if err != nil {
		l.Close()
		return nil, err
	}
	go func() {
		defer close(tr.done)
		defer func() { <-recvDone }()
		defer c.Close()
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		buf := make([]byte, 64<<10)
		h := sha256.New()
		for size == 0 || tr.Sent < size {
			select {
			case <-tr.stop:
				copy(tr.SentSum[:], h.Sum(nil))
				return
			default:
			}
			for i := 0; i < len(buf); i += 8 {
				binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
			}
			chunk := buf
			if size > 0 && int64(len(chunk)) > size-tr.Sent {
				chunk = chunk[:size-tr.Sent]
			}
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				tr.SendErr = fmt.Errorf("send: %w", err)
				return
			}
			h.Write(chunk)
			tr.Sent += int64(len(chunk))
		}
		copy(tr.SentSum[:], h.Sum(nil))
	}()
	return tr, nil
}

// Stop ends an open-ended transfer and waits for both sides.
func (tr *Transfer) Stop() {
	close(tr.stop)
	<-tr.done
}

// Wait waits for a sized transfer to finish.
func (tr *Transfer) Wait(timeout time.Duration) error {
	select {
	case <-tr.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("transfer not done after %v (%d bytes sent)", timeout, tr.Sent)
	}
}

// Check reports a transfer that failed or arrived different from what was sent.
func (tr *Transfer) Check() error {
	switch {
	case tr.SendErr != nil || tr.RecvErr != nil:
		return errors.Join(tr.SendErr, tr.RecvErr)
	case tr.Sent == 0:
		return fmt.Errorf("nothing was sent")
	case tr.Sent != tr.Received || tr.SentSum != tr.ReceivedSum:
		return fmt.Errorf("sent %d bytes (sha256 %x), received %d (sha256 %x)", tr.Sent, tr.SentSum[:6], tr.Received, tr.ReceivedSum[:6])
	}
	return nil
}
