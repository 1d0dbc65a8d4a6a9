// Package chaos is the chaos harness's machinery: a seeded driver that kills
// processes and injects faults at random points, a TCP proxy that drops and
// delays connections, and the run's summary. The harness itself, which runs
// lifecycles on the emulated rack against real processes and checks the
// invariants after, is demo/chaos_test.go (task chaos).
package chaos

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// Proxy forwards TCP connections from a loopback port to a target, and on
// demand cuts them (Drop) or slows them (Delay): the network between a site
// and its control plane.
type Proxy struct {
	ln     net.Listener
	target string

	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	refuseUntil time.Time
	delayUntil  time.Time
	delay       time.Duration

	accepted, refused atomic.Int64
	wg                sync.WaitGroup
}

// Listen starts a proxy to target on 127.0.0.1 (a free port).
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "listen for the proxy to %s", target)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Drop cuts every open connection at once and, for the next refuse, closes
// each new one as soon as it is accepted: a link that went down.
func (p *Proxy) Drop(refuse time.Duration) {
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(refuse)
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Delay holds every chunk forwarded either way for d, for the next
// window: a slow, congested link (connections stay up).
func (p *Proxy) Delay(d, window time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.delayUntil = d, time.Now().Add(window)
}

// Counts are the connections the proxy forwarded and refused so far.
func (p *Proxy) Counts() (accepted, refused int64) { return p.accepted.Load(), p.refused.Load() }

// Close stops the proxy and cuts its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Drop(0)
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := time.Now().Before(p.refuseUntil)
		p.mu.Unlock()
		if refuse {
			p.refused.Add(1)
			c.Close()
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward joins the client c to a new connection to the target until
// either side ends or Drop cuts them.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, u) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.copy(u, c); done <- struct{}{} }()
	go func() { p.copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// track registers both ends, or closes them when a Drop came meanwhile.
func (p *Proxy) track(c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.refuseUntil) {
		c.Close()
		u.Close()
		return false
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	return true
}

// copy forwards src to dst, holding each chunk while a Delay lasts.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.currentDelay(); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite() // pass the half-close on
			}
			return
		}
	}
}

func (p *Proxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.delayUntil) {
		return p.delay
	}
	return 0
}
