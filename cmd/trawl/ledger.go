package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
)

const ledgerUsage = `usage:
  trawl ledger serve [flags]   run a ledger voter with no gate (internal API and billing routes)
  trawl ledger join --leader URL --id ID --raft ADDR --api ADDR   add a voter
  trawl ledger remove --leader URL --id ID                       remove a voter
  trawl ledger status --url URL                                  a voter's view of the group
  trawl ledger audit --data DIR            audit a stopped node's data directory
  trawl ledger audit --url URL --key KEY   audit a live gate's journal (auditor key)
`

// errAuditFailed makes the process exit non-zero after the report is printed.
var errAuditFailed = errors.New("audit found violations")

func runLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, ledgerUsage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		return runLedgerServe(ctx, args[1:], stderr)
	case "audit":
		return runLedgerAudit(ctx, args[1:], stdout, stderr)
	case "join", "remove", "status":
		return runLedgerMembers(ctx, args[0], args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "trawl ledger: unknown command %q\n\n%s", args[0], ledgerUsage)
		return flag.ErrHelp
	}
}

// parsePeers reads "eu=127.0.0.1:7001/127.0.0.1:7101,sin=…" (id=raft/api).
func parsePeers(s string) ([]ledger.Peer, error) {
	var peers []ledger.Peer
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addrs, ok := strings.Cut(part, "=")
		raftAddr, apiAddr, ok2 := strings.Cut(addrs, "/")
		if !ok || !ok2 || id == "" || raftAddr == "" || apiAddr == "" {
			return nil, fmt.Errorf("peer %q: want id=raft_addr/api_addr", part)
		}
		peers = append(peers, ledger.Peer{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr})
	}
	return peers, nil
}

func runLedgerServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledger serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "eu", "this voter's id: its region")
	data := fs.String("data", "./data/eu/ledger", "data directory (raft/, snapshots/, state/)")
	raftAddr := fs.String("raft", "127.0.0.1:7001", "Raft address (listen and advertise)")
	apiAddr := fs.String("api", "127.0.0.1:7101", "HTTP address for forwarded commands")
	peersFlag := fs.String("peers", "", "all voters: id=raft/api,… (default: this node alone)")
	bootstrap := fs.Bool("bootstrap", true, "form the cluster from --peers if the data directory is new")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pricesFile := fs.String("prices", "", "price table JSON (default: the built-in launch table)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	secret := os.Getenv("TRAWL_LEDGER_SECRET")
	if secret == "" {
		return errors.New("set TRAWL_LEDGER_SECRET: the secret the voters share to forward commands")
	}
	peers, err := parsePeers(*peersFlag)
	if err != nil {
		return err
	}
	if len(peers) == 0 {
		peers = []ledger.Peer{{ID: *id, RaftAddr: *raftAddr, APIAddr: *apiAddr}}
	}
	l, err := net.Listen("tcp", *apiAddr)
	if err != nil {
		return err
	}
	n, err := ledger.OpenNode(ledger.NodeConfig{
		ID: *id, DataDir: *data, RaftAddr: *raftAddr, Peers: peers,
		Bootstrap: *bootstrap, Secret: secret, Logger: logger,
	})
	if err != nil {
		l.Close()
		return err
	}
	table := billing.DefaultPrices()
	if *pricesFile != "" {
		if table, err = billing.LoadPrices(*pricesFile); err != nil {
			n.Close()
			l.Close()
			return err
		}
	}
	// Without a gate, the voter serves the billing routes itself (balance,
	// settings, prices, the auditor's journal); top-ups need a provider and
	// answer 503 here.
	bcfg := billing.Config{State: n.State(), Ledger: n, Prices: table, Region: *id, Logger: logger}
	mux := http.NewServeMux()
	mux.Handle("/internal/", n.Handler())
	mux.Handle("/", billing.NewHandler(bcfg))
	// Month starts, lapsed passes and auto-recharges, on whichever voter leads.
	go billing.RunMaintenance(ctx, bcfg, n.IsLeader, time.Minute)
	logger.Info("ledger serving", "id", *id, "raft", *raftAddr, "api", l.Addr().String(), "data", *data)
	serveErr := serve(ctx, l, mux, logger)
	if err := n.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

func runLedgerAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledger audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "a stopped node's data directory (the one holding state/)")
	url := fs.String("url", "", "a live gate's base URL")
	key := fs.String("key", "", "an auditor API key (with --url)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rep *ledger.AuditReport
	var err error
	switch {
	case *data != "" && *url == "":
		rep, err = auditDir(*data)
	case *url != "" && *data == "":
		rep, err = auditURL(ctx, *url, *key)
	default:
		return errors.New("give either --data DIR or --url URL --key KEY")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "entries     %d\nlast_hash   %s\nstate_hash  %s\n", rep.Entries, rep.LastHash, rep.StateHash)
	if !rep.OK() {
		for _, v := range rep.Violations {
			fmt.Fprintf(stdout, "VIOLATION   %s\n", v)
		}
		return errAuditFailed
	}
	if rep.AnchoredAt > 0 {
		// A replica that restored a snapshot without the entries before it
		// and has not fetched them yet: what follows is verified from the
		// anchor; a running node fetches them from another voter.
		fmt.Fprintf(stdout, "anchored    verified from entry %d (the anchor's hash and balances); entries 1-%d are on the other voters: audit one of them, or start this node to fetch them\n", rep.AnchoredAt+1, rep.AnchoredAt)
	}
	fmt.Fprintln(stdout, "ok          hash chain, zero sum and single charges verified")
	return nil
}

func auditDir(dir string) (*ledger.AuditReport, error) {
	stateDir := filepath.Join(dir, "state")
	if _, err := os.Stat(stateDir); err != nil {
		return nil, fmt.Errorf("%s is not a ledger node's data directory (no state/)", dir)
	}
	st, err := store.Open(stateDir, &store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	s, err := ledger.OpenState(st)
	if err != nil {
		return nil, err
	}
	return s.Audit()
}

func auditURL(ctx context.Context, base, key string) (*ledger.AuditReport, error) {
	if key == "" {
		return nil, errors.New("--url needs --key (an auditor key)")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/ledger/journal?after=0", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("journal: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	a := ledger.NewAuditor()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e ledger.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("journal line %q: %w", sc.Text(), err)
		}
		a.Add(&e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return a.Report(nil), nil
}

func runLedgerMembers(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledger "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	leader := fs.String("leader", "", "the leader's API URL (join, remove)")
	url := fs.String("url", "", "a voter's API URL (status)")
	id := fs.String("id", "", "the voter's id (its region)")
	raftAddr := fs.String("raft", "", "the new voter's Raft address (join)")
	apiAddr := fs.String("api", "", "the new voter's API address (join)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := os.Getenv("TRAWL_LEDGER_SECRET")
	if secret == "" {
		return errors.New("set TRAWL_LEDGER_SECRET")
	}
	var method, target string
	var body io.Reader
	switch verb {
	case "join":
		if *leader == "" || *id == "" || *raftAddr == "" || *apiAddr == "" {
			return errors.New("join needs --leader, --id, --raft and --api")
		}
		b, _ := json.Marshal(ledger.Peer{ID: *id, RaftAddr: *raftAddr, APIAddr: *apiAddr})
		method, target, body = http.MethodPost, strings.TrimRight(*leader, "/")+ledger.MembersPath, strings.NewReader(string(b))
	case "remove":
		if *leader == "" || *id == "" {
			return errors.New("remove needs --leader and --id")
		}
		method, target = http.MethodDelete, strings.TrimRight(*leader, "/")+ledger.MembersPath+"/"+*id
	case "status":
		if *url == "" {
			return errors.New("status needs --url")
		}
		method, target = http.MethodGet, strings.TrimRight(*url, "/")+ledger.StatusPath
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Ledger-Secret", secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(out)))
	}
	stdout.Write(out)
	return nil
}
