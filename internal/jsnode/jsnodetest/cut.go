package jsnodetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"sync"
	"time"
)

// A cut cell is gone for the others as a process killed with SIGKILL is:
// its routes drop at once and none connects again, without the orderly
// shutdown in which a closing server hands its Raft leaderships over
// (Node.Close does that, so a test of the seconds before a new leader is
// elected cuts the leader instead of closing it).
//
// With Cuttable set before the first Add, every node is reached through
// a relay of its own on loopback: Peers give the relays' addresses, and
// each node advertises its relay (jsnode.Config.RouteAdvertise), so a
// route a node learns of from another goes through it too. A relay knows
// the dialling node by the server name in the route's CONNECT.

// relay carries the routes to cell's node.
type relay struct {
	c     *Cluster
	cell  string
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]string // → the dialling cell ("" until known)
}

// relayAddr is the address of cell's relay, started on first use.
// Called with c.mu held.
func (c *Cluster) relayAddr(cell string) string {
	r := c.relays[cell]
	if r == nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.t.Fatalf("jsnodetest: relay for %s: %v", cell, err)
		}
		r = &relay{c: c, cell: cell, l: l, conns: map[net.Conn]string{}}
		c.relays[cell] = r
		go r.serve()
		c.t.Cleanup(func() { l.Close(); r.drop(func(string) bool { return true }) })
	}
	return r.l.Addr().String()
}

func (r *relay) serve() {
	for {
		in, err := r.l.Accept()
		if err != nil {
			return
		}
		go r.carry(in)
	}
}

// cellOf is the cell whose node has server id, "" if none running does.
// Called with c.mu held.
func (c *Cluster) cellOf(id string) string {
	for cell, n := range c.nodes {
		if n.Server().ID() == id {
			return cell
		}
	}
	return ""
}

func (r *relay) carry(in net.Conn) {
	c := r.c
	c.mu.Lock()
	cut, target := c.cut[r.cell], c.addrs[r.cell]
	c.mu.Unlock()
	if cut || target == "" {
		in.Close()
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		in.Close()
		return
	}
	r.mu.Lock()
	r.conns[in], r.conns[out] = "", ""
	r.mu.Unlock()
	defer func() {
		in.Close()
		out.Close()
		r.mu.Lock()
		delete(r.conns, in)
		delete(r.conns, out)
		r.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(in, out); done <- struct{}{} }()
	// The dialler's first line is its CONNECT, which names its server.
	br := bufio.NewReaderSize(in, 64<<10)
	in.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	in.SetReadDeadline(time.Time{})
	if err != nil {
		return
	}
	var connect struct{ Name string }
	if rest, ok := bytes.CutPrefix(line, []byte("CONNECT ")); ok {
		json.Unmarshal(bytes.TrimSpace(rest), &connect)
	}
	c.mu.Lock()
	from := c.cellOf(connect.Name)
	cut = c.cut[from] || c.cut[r.cell]
	c.mu.Unlock()
	if cut {
		return
	}
	r.mu.Lock()
	r.conns[in], r.conns[out] = from, from
	r.mu.Unlock()
	if _, err := out.Write(line); err != nil {
		return
	}
	go func() { io.Copy(out, br); done <- struct{}{} }()
	<-done
}

// drop closes the connections whose dialling cell match says to.
func (r *relay) drop(match func(from string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cn, from := range r.conns {
		if match(from) {
			cn.Close()
		}
	}
}

// Cut drops every route of cell's node at once and refuses new ones
// until Heal: for the other nodes it is dead, though it still runs (and
// its own clients still reach it). The cluster must be Cuttable.
func (c *Cluster) Cut(cell string) {
	c.t.Helper()
	c.mu.Lock()
	if !c.Cuttable {
		c.mu.Unlock()
		c.t.Fatal("jsnodetest: Cut on a cluster that is not Cuttable")
	}
	if _, ok := c.dirs[cell]; !ok {
		c.mu.Unlock()
		c.t.Fatalf("jsnodetest: Cut(%q): no such cell", cell)
	}
	c.cut[cell] = true
	relays := make([]*relay, 0, len(c.relays))
	for _, r := range c.relays {
		relays = append(relays, r)
	}
	c.mu.Unlock()
	for _, r := range relays {
		all := r.cell == cell
		r.drop(func(from string) bool { return all || from == cell })
	}
}

// Heal lets cell's routes connect again.
func (c *Cluster) Heal(cell string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cut, cell)
}
