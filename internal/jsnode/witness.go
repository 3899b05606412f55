package jsnode

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A clustered node that starts with nobody to route to would never run
// JetStream: every Raft group of nats-server waits, before its first
// step, until the server has at least one route (raft.go run: "Waiting
// for routing to be established..."), and the meta group is one. So a
// node that starts alone also starts a witness: a second server in the
// process, without JetStream, whose only role is to route to the node so
// that the meta group starts (and, its peer state seeded for one,
// elects the node). The witness has no storage and takes no part in any
// Raft group; it is shut down as soon as the node's JetStream answers,
// or after witnessLife if it never does (a node alone whose region had
// more cells: it must wait for them, and does).
const witnessLife = 30 * time.Second

func (n *Node) startWitness(node *server.Options) error {
	route := *n.routeURL
	opts := &server.Options{
		ServerName:    n.name + "-witness",
		NoSigs:        true,
		Host:          "127.0.0.1",
		Port:          server.RANDOM_PORT,
		Authorization: randomHex(16),
		Cluster: server.ClusterOpts{
			Name:        node.Cluster.Name,
			Host:        "127.0.0.1",
			Port:        server.RANDOM_PORT,
			Username:    node.Cluster.Username,
			Password:    node.Cluster.Password,
			NoAdvertise: true,
			TLSConfig:   cloneTLS(node.Cluster.TLSConfig),
			TLSTimeout:  node.Cluster.TLSTimeout,
		},
		Routes: []*url.URL{&route},
	}
	w, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("jsnode: witness: %w", err)
	}
	w.SetLoggerV2(&logger{l: n.cfg.Logger.With("nats", opts.ServerName)}, false, false, false)
	w.Start()
	if !w.ReadyForConnections(10 * time.Second) {
		w.Shutdown()
		w.WaitForShutdown()
		return fmt.Errorf("jsnode: witness: %w", ErrNotReady)
	}
	n.wmu.Lock()
	n.witness = w
	n.wmu.Unlock()
	return nil
}

// endWitness stops the witness once the node's JetStream answers.
func (n *Node) endWitness() {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), witnessLife)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	n.Ready(ctx)
	n.stopWitness()
}

func (n *Node) stopWitness() {
	n.wmu.Lock()
	w := n.witness
	n.witness = nil
	n.wmu.Unlock()
	if w != nil {
		w.Shutdown()
		w.WaitForShutdown()
	}
}
