package jsnode

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How long a probe waits for a route to a peer, and then for JetStream to
// answer through it. A leader answers within milliseconds (a join took
// 66 ms in all in TestGrowOneToThree); peers without a leader do not
// answer at all, so probeAskWait is what every cell of a new region
// (trawl dev --cells 3) adds to its start.
const (
	probeRouteWait = 3 * time.Second
	probeAskWait   = time.Second
)

// probeLeader reports whether the region's running cells have a JetStream
// meta leader (bootstrap.go). It starts a short-lived server without
// JetStream that routes to the peers and asks JetStream for the account's
// info through an in-process connection: a meta leader answers it.
// Anything else (no route within probeRouteWait, an error, no answer)
// means the peers are starting too.
func (n *Node) probeLeader(node *server.Options) bool {
	var routes []*url.URL
	for _, r := range node.Routes {
		if r.Host != n.routeURL.Host {
			c := *r
			routes = append(routes, &c)
		}
	}
	token := randomHex(16)
	opts := &server.Options{
		ServerName:    n.name + "-probe",
		NoSigs:        true,
		Host:          "127.0.0.1",
		Port:          server.RANDOM_PORT,
		Authorization: token,
		Cluster: server.ClusterOpts{
			Name:        node.Cluster.Name,
			Host:        node.Cluster.Host,
			Port:        server.RANDOM_PORT,
			Username:    node.Cluster.Username,
			Password:    node.Cluster.Password,
			NoAdvertise: true,
			TLSConfig:   cloneTLS(node.Cluster.TLSConfig),
			TLSTimeout:  node.Cluster.TLSTimeout,
		},
		Routes: routes,
	}
	p, err := server.NewServer(opts)
	if err != nil {
		n.cfg.Logger.Warn("jsnode: probe", "err", err)
		return false
	}
	p.SetLoggerV2(&logger{l: n.cfg.Logger.With("nats", opts.ServerName)}, false, false, false)
	p.Start()
	defer func() {
		p.Shutdown()
		p.WaitForShutdown()
	}()
	if !p.ReadyForConnections(10 * time.Second) {
		return false
	}
	deadline := time.Now().Add(probeRouteWait)
	for p.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	nc, err := nats.Connect("", nats.InProcessServer(p), nats.Token(token))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeAskWait)
	defer cancel()
	for {
		_, err := js.AccountInfo(ctx)
		if err == nil {
			return true
		}
		// The route's interest in the JetStream API may not have
		// reached the probe yet.
		if !errors.Is(err, nats.ErrNoResponders) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cloneTLS gives each in-process server its own copy of the routes' TLS
// configuration: a server may set fields of the one it is given.
func cloneTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Clone()
}
