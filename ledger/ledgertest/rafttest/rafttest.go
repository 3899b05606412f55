// Package rafttest runs several hashicorp/raft servers in one process for
// tests and benchmarks: it starts, stops and restarts them by id on their
// durable state, and polls for a leader. It knows nothing of what the
// servers replicate, so it serves both the ledger's harness
// (ledger/ledgertest) and the tests of the Raft log store
// (ledger/raftpebble), which the ledger imports and so cannot import the
// ledger's harness in its own package's tests.
package rafttest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/testwait"
)

// Server is one Raft server of a Cluster. Start opens it on its durable
// state (it may have run before); Stop shuts it down as a process exit
// would. Raft is the running instance, nil while stopped.
type Server interface {
	Start() error
	Stop() error
	Raft() *raft.Raft
}

// Cluster starts and stops its servers by id. It is safe for concurrent
// use; a server's Start and Stop are never called concurrently.
type Cluster struct {
	mu      sync.Mutex
	ids     []string
	servers map[string]Server
	running map[string]bool
	ops     map[string]*sync.Mutex // serialises Start and Stop per server
}

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{servers: map[string]Server{}, running: map[string]bool{}, ops: map[string]*sync.Mutex{}}
}

// Add registers s under id, stopped.
func (c *Cluster) Add(id string, s Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.servers[id]; ok {
		panic("rafttest: server " + id + " added twice")
	}
	c.ids = append(c.ids, id)
	c.servers[id] = s
	c.ops[id] = new(sync.Mutex)
}

// IDs are the servers' ids in the order they were added.
func (c *Cluster) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// Server is the server added under id, or nil.
func (c *Cluster) Server(id string) Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[id]
}

// Running reports whether id is started.
func (c *Cluster) Running(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[id]
}

func (c *Cluster) lookup(id string) (Server, *sync.Mutex, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return nil, nil, fmt.Errorf("rafttest: no server %q", id)
	}
	return s, c.ops[id], nil
}

// Start starts id; starting a running server does nothing.
func (c *Cluster) Start(id string) error {
	s, op, err := c.lookup(id)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	if c.Running(id) {
		return nil
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("rafttest: start %s: %w", id, err)
	}
	c.mu.Lock()
	c.running[id] = true
	c.mu.Unlock()
	return nil
}

// StartAll starts every server that is stopped, in the order they were
// added.
func (c *Cluster) StartAll() error {
	for _, id := range c.IDs() {
		if err := c.Start(id); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops id; stopping a stopped server does nothing.
func (c *Cluster) Stop(id string) error {
	s, op, err := c.lookup(id)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	if !c.Running(id) {
		return nil
	}
	c.mu.Lock()
	c.running[id] = false
	c.mu.Unlock()
	if err := s.Stop(); err != nil {
		return fmt.Errorf("rafttest: stop %s: %w", id, err)
	}
	return nil
}

// Close stops every running server and returns the first error.
func (c *Cluster) Close() error {
	var errs []error
	for _, id := range c.IDs() {
		errs = append(errs, c.Stop(id))
	}
	return errors.Join(errs...)
}

// Leader polls until a running server for which counts returns true (nil:
// any) leads, and returns its id.
func (c *Cluster) Leader(timeout time.Duration, counts func(id string) bool) (string, error) {
	var leader string
	err := testwait.Poll(timeout, func() bool {
		for _, id := range c.IDs() {
			if !c.Running(id) || (counts != nil && !counts(id)) {
				continue
			}
			if r := c.Server(id).Raft(); r != nil && r.State() == raft.Leader {
				leader = id
				return true
			}
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("rafttest: no leader: %w", err)
	}
	return leader, nil
}
