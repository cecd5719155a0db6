// Package faultproxy is a TCP proxy for tests that need a server to fail on cue: cut every
// connection (the server "goes away"), or hold its answers while the client's requests
// still reach it (the server did the work, the client never hears back).
package faultproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards 127.0.0.1:<port> to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  bool
	gate  chan struct{} // closed while answers flow; open while they are held
}

// Start listens on a free loopback port and forwards to target until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Hold stops passing the server's bytes to clients; what clients send still arrives.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Restore accepts connections again and releases held answers.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() {
			io.Copy(s, c) //nolint:errcheck // either side closing ends the pair
			s.Close()
			c.Close()
		}()
		go p.answers(s, c)
	}
}

// answers copies server -> client, waiting at the gate before each write.
func (p *Proxy) answers(s, c net.Conn) {
	defer s.Close()
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
