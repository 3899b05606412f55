package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

type ledgerRig struct {
	t     *testing.T
	peers []ledger.Peer
	data  map[string]string
	procs map[string]*proc
}

func pickAddr(t *testing.T, ip string) string {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (r *ledgerRig) start(id string) {
	var peerArgs []string
	var self ledger.Peer
	for _, p := range r.peers {
		peerArgs = append(peerArgs, fmt.Sprintf("%s=%s/%s", p.ID, p.RaftAddr, p.APIAddr))
		if p.ID == id {
			self = p
		}
	}
	r.procs[id] = launch(r.t, []string{"TRAWL_LEDGER_SECRET=e2e-secret"}, "ledger serving",
		"ledger", "serve", "--id", id, "--data", r.data[id], "--raft", self.RaftAddr, "--api", self.APIAddr,
		"--peers", strings.Join(peerArgs, ","), "--log-level", "info")
}

// submit sends a command to whichever voter leads, as a follower forwards it.
func (r *ledgerRig) submit(cmd *ledger.Command) *ledger.Result {
	r.t.Helper()
	body, _ := json.Marshal(cmd)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range r.procs {
			req, _ := http.NewRequest("POST", p.base+ledger.ApplyPath, bytes.NewReader(body))
			req.Header.Set("X-Ledger-Secret", "e2e-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				var res ledger.Result
				json.Unmarshal(b, &res)
				if res.Error != "" {
					r.t.Fatalf("%s refused: %s", cmd.ID, res.Message)
				}
				return &res
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("no leader took %s", cmd.ID)
	return nil
}

func (r *ledgerRig) status(p *proc) (ledger.NodeStatus, bool) {
	req, _ := http.NewRequest("GET", p.base+ledger.StatusPath, nil)
	req.Header.Set("X-Ledger-Secret", "e2e-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ledger.NodeStatus{}, false
	}
	defer resp.Body.Close()
	var st ledger.NodeStatus
	return st, json.NewDecoder(resp.Body).Decode(&st) == nil
}

func audit(t *testing.T, dir string) (string, bool) {
	out, err := exec.Command(trawlBin, "ledger", "audit", "--data", dir).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return string(out), false
		}
		t.Fatalf("audit %s: %v\n%s", dir, err, out)
	}
	return string(out), true
}

func stateHashOf(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "state_hash") {
			return strings.TrimSpace(strings.TrimPrefix(l, "state_hash"))
		}
	}
	return ""
}

// TestLedgerProcesses runs three voters as real processes on 127.0.0.1-3,
// kills the leader with SIGKILL mid-traffic, restarts it, then audits every
// stopped node's data directory with `trawl ledger audit`: same state hash,
// chain intact; and a journal with one byte flipped fails the audit.
func TestLedgerProcesses(t *testing.T) {
	r := &ledgerRig{t: t, data: map[string]string{}, procs: map[string]*proc{}}
	for i, id := range []string{"eu", "sin", "us"} {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		r.peers = append(r.peers, ledger.Peer{ID: id, RaftAddr: pickAddr(t, ip), APIAddr: pickAddr(t, ip)})
		r.data[id] = filepath.Join(t.TempDir(), "ledger")
	}
	for _, p := range r.peers {
		r.start(p.ID)
	}
	// The commands carry today's time: the leader's billing maintenance
	// submits commands stamped now, and a command in a later month than
	// the account's turns its month (a monthly grant, one more journal
	// entry). With a fixed past date the count below depended on whether
	// that pass ran before or after the account was created.
	t0 := time.Now().UTC()
	if next := time.Date(t0.Year(), t0.Month()+1, 1, 0, 0, 0, 0, time.UTC); next.Sub(t0) < 5*time.Minute {
		t0 = next // the run would cross the month: start in the next one
	}
	r.submit(&ledger.Command{ID: "acct", Type: ledger.CmdCreateAccount, Time: t0, CreateAccount: &ledger.CreateAccount{Account: "a", Plan: ledger.PlanFree}})
	r.submit(&ledger.Command{ID: "grant", Type: ledger.CmdGrant, Time: t0, Grant: &ledger.Grant{Account: "a", Bucket: ledger.BucketSignup, Amount: ledger.Credits(100)}})
	settle := func(i int) *ledger.Command {
		return &ledger.Command{ID: fmt.Sprintf("settle-%d", i), Type: ledger.CmdSettle, Time: t0,
			Settle: &ledger.Settle{Region: "eu", Charges: []ledger.Charge{{Account: "a", Receipt: fmt.Sprintf("r%d", i), Amount: 100}}}}
	}
	auditorKey := "trawl_auditor_e2e_0123456789"
	r.submit(&ledger.Command{ID: "auditor", Type: ledger.CmdAddKey, Time: t0, AddKey: &ledger.Key{
		ID: "key_auditor", Account: "a", Hash: billing.HashKey(auditorKey), Prefix: auditorKey[:12], Role: ledger.RoleAuditor, Kind: "permanent"}})
	r.submit(&ledger.Command{ID: "hold", Type: ledger.CmdHold, Time: t0, Hold: &ledger.HoldRequest{Account: "a", Region: "eu", Want: ledger.Credits(50)}})
	for i := range 20 {
		r.submit(settle(i))
	}
	var leaderID string
	for id, p := range r.procs {
		if st, ok := r.status(p); ok && st.State == "Leader" {
			leaderID = id
		}
	}
	if leaderID == "" {
		t.Fatal("no leader found")
	}
	r.procs[leaderID].kill(t)
	delete(r.procs, leaderID)
	for i := 20; i < 40; i++ {
		r.submit(settle(i))
	}
	r.submit(settle(5)) // a retried settle: charged once
	r.start(leaderID)
	r.submit(settle(40))

	// Wait until every voter has applied the same journal, then stop them
	// gracefully: the audit reads stopped nodes' directories.
	if err := testwait.Poll(20*time.Second, func() bool {
		var want ledger.NodeStatus
		for _, p := range r.procs {
			st, ok := r.status(p)
			if !ok || st.Entries != 43 {
				return false
			}
			if want.LastHash == "" {
				want = st
			} else if st.LastHash != want.LastHash {
				return false
			}
		}
		return true
	}); err != nil {
		for id, p := range r.procs {
			st, ok := r.status(p)
			t.Logf("%s: %+v (answered %v)", id, st, ok)
		}
		t.Fatalf("replicas to converge: %v", err)
	}

	// The live audit reads the journal over HTTP with the auditor key.
	var live string
	for _, p := range r.procs {
		out, err := exec.Command(trawlBin, "ledger", "audit", "--url", p.base, "--key", auditorKey).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok ") {
			t.Fatalf("live audit: %v\n%s", err, out)
		}
		live = stateHashOf(string(out))
		break
	}
	if out, err := exec.Command(trawlBin, "ledger", "audit", "--url", r.procs["eu"].base, "--key", "wrong").CombinedOutput(); err == nil {
		t.Fatalf("audit with a wrong key passed:\n%s", out)
	}
	for _, p := range r.procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
	}
	var hashes []string
	for _, p := range r.peers {
		out, ok := audit(t, r.data[p.ID])
		if !ok {
			t.Fatalf("audit of %s failed:\n%s", p.ID, out)
		}
		hashes = append(hashes, stateHashOf(out))
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] || hashes[0] == "" {
		t.Fatalf("replicas differ: %v", hashes)
	}
	if live != hashes[0] {
		t.Fatalf("live audit state hash %s, stopped nodes %s", live, hashes[0])
	}
	out, _ := audit(t, r.data["eu"])
	if !strings.Contains(out, "entries     43") { // grant, hold, 41 charges
		t.Fatalf("audit:\n%s", out)
	}

	// Flip one byte in one journal entry: the audit must fail.
	dir := filepath.Join(r.data["us"], "state")
	st, err := store.Open(dir, &store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var key, val []byte
	st.Scan([]byte("L/~/j/"), nil, func(k, v []byte) (bool, error) {
		key, val = append([]byte(nil), k...), append([]byte(nil), v...)
		return false, nil
	})
	i := bytes.Index(val, []byte(`"amount_mc":`)) + len(`"amount_mc":`)
	val[i] ^= 0x01 // 1 → 0, 2 → 3 …: still a digit, now a different amount
	st.Set(key, val, store.Sync)
	st.Close()
	out, ok := audit(t, r.data["us"])
	if ok || !strings.Contains(out, "VIOLATION") {
		t.Fatalf("tampered journal passed the audit:\n%s", out)
	}
}
