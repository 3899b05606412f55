package regiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// mailSink is a real SMTP server on loopback (go-smtp, as the sign-up
// tests' sink) keeping what it receives.
type mailSink struct {
	addr string
	mu   sync.Mutex
	msgs [][]byte
	to   []string
}

func newMailSink(t *testing.T) *mailSink {
	t.Helper()
	sink := &mailSink{}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return &mailSession{sink: sink}, nil }))
	s.Domain = "sink.test"
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return sink
}

type mailSession struct{ sink *mailSink }

func (s *mailSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.sink.mu.Lock()
	s.sink.to = append(s.sink.to, to)
	s.sink.mu.Unlock()
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, b)
	s.sink.mu.Unlock()
	return err
}
func (s *mailSession) Reset()        {}
func (s *mailSession) Logout() error { return nil }

// notify.email: a confirmed change is mailed through the gate's SMTP
// settings (those of the sign-up mail), once, with the summary and the
// facts; the timeline shows delivery.email delivered.
func TestMonitorEmail(t *testing.T) {
	sink := newMailSink(t)
	clk := &fakeClock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	price := "50"
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, strings.Replace(shopPage, "PRICE", price, 1))
	}))
	defer shop.Close()
	g := Start(t, Options{SMTP: sink.addr, SMTPFrom: "trawl <noreply@trawl.example>", Cell: func(c *cell.Config) {
		c.Now = clk.Now
		c.Monitor.ConfirmAfter = 2 * time.Minute
	}})
	mon := g.Cells[0].Cell.Monitors()
	key := g.Account(t, "supporter", 100)
	r := call(t, "POST", g.URL+"/monitors", key, `{"url":"`+shop.URL+`/shop","watch":"the price drops below 48","every":"1h","name":"widget price","notify":{"email":"buyer@example.com"}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := between(r.body, `"id":"`, `"`)
	ctx := context.Background()
	testwait.Until(t, 10*time.Second, "the baseline", func() bool {
		m, err := mon.Get(ctx, "acct1", id)
		return err == nil && m.Baseline.Status == "ok"
	})

	mu.Lock()
	price = "45"
	mu.Unlock()
	clk.Add(time.Hour)
	mon.Kick()
	testwait.Until(t, 10*time.Second, "first sight", func() bool {
		es, _ := mon.Events(ctx, "acct1", id, time.Time{}, 10)
		return len(es) == 1 && es[0].Delivery.Email != nil && es[0].Delivery.Email.Status == "waiting for confirmation"
	})

	clk.Add(2 * time.Minute)
	mon.Kick()
	deadline := time.Now().Add(30 * time.Second)
	for {
		es, _ := mon.Events(ctx, "acct1", id, time.Time{}, 10)
		if len(es) == 1 && es[0].Delivery.Done && es[0].Delivery.Email != nil && es[0].Delivery.Email.Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			raw, _ := json.Marshal(es)
			sink.mu.Lock()
			t.Fatalf("timed out waiting for the mail: %d received; events %s", len(sink.msgs), raw)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 1 || len(sink.to) != 1 || sink.to[0] != "buyer@example.com" {
		t.Fatalf("%d mails to %v", len(sink.msgs), sink.to)
	}
	m, err := mail.ReadMessage(bytes.NewReader(sink.msgs[0]))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	body, _ := io.ReadAll(quotedprintable.NewReader(m.Body))
	if subject != "Change on widget price" || !strings.Contains(string(body), `Price of "Widget" changed from "50" to "45"`) ||
		!strings.Contains(string(body), `- changed Widget / Price: "50" -> "45"`) || !strings.Contains(string(body), "/monitors/"+id+"/versions/") {
		t.Fatalf("mail %q:\n%s", subject, body)
	}
	if from, _ := mail.ParseAddress(m.Header.Get("From")); from == nil || from.Address != "noreply@trawl.example" {
		t.Fatalf("from %q", m.Header.Get("From"))
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}

// With the operator's model configured (the client /extract uses), the
// cell's monitors split the watch sentence with it.
func TestMonitorModelSplitThroughGate(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.Completion(w, `{"conditions":["the widget gets cheaper","the gadget is sold out"]}`)
	})
	client, err := llm.New(llm.Config{BaseURLs: map[string]string{"test": srv.URL + "/v1"}, RetryBase: 1}, "test/model-1", "k")
	if err != nil {
		t.Fatal(err)
	}
	g := Start(t, Options{Cell: func(c *cell.Config) { c.Model = &extract.ModelConfig{Client: client} }})
	key := g.Account(t, "supporter", 100)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Replace(shopPage, "PRICE", "50", 1))
	}))
	defer shop.Close()
	r := call(t, "POST", g.URL+"/monitors", key, `{"url":"`+shop.URL+`/shop","watch":"widget cheaper, gadget gone"}`)
	if r.status != 201 || !strings.Contains(r.body, `{"id":"c1","text":"the widget gets cheaper"},{"id":"c2","text":"the gadget is sold out"}`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if srv.Calls() != 1 {
		t.Fatalf("%d model calls", srv.Calls())
	}
}
