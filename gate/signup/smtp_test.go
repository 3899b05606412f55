package signup_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/trawlhq/trawl/gate/signup"
)

// received is one message an smtpSink accepted.
type received struct {
	from string
	to   []string
	data []byte
	tls  bool
	user string // logged in as ("" without AUTH)
}

// smtpSink is a real SMTP server on loopback (go-smtp) that keeps what it
// receives in memory. With tlsCfg it offers STARTTLS; with users it requires
// AUTH PLAIN with one of them.
type smtpSink struct {
	addr  string
	users map[string]string
	mu    sync.Mutex
	msgs  []received
}

func newSMTPSink(t testing.TB, tlsCfg *tls.Config, users map[string]string) *smtpSink {
	t.Helper()
	sink := &smtpSink{users: users}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		return &smtpSession{sink: sink, conn: c}, nil
	}))
	s.Domain = "sink.test"
	s.TLSConfig = tlsCfg
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.MaxMessageBytes = 1 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return sink
}

func (s *smtpSink) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

type smtpSession struct {
	sink *smtpSink
	conn *gosmtp.Conn
	from string
	to   []string
	user string
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := s.sink.users[user]; !ok || want != pass {
			return errors.New("invalid credentials")
		}
		s.user = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *gosmtp.MailOptions) error {
	if s.sink.users != nil && s.user == "" {
		return &gosmtp.SMTPError{Code: 530, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, received{from: s.from, to: s.to, data: b, tls: isTLS, user: s.user})
	s.sink.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.from, s.to = "", nil }
func (s *smtpSession) Logout() error { return nil }

// parsed is a received message read as a mail client would.
type parsed struct {
	header  mail.Header
	subject string
	body    string
}

func parseMail(t testing.TB, data []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not an RFC 5322 message: %v\n%s", err, data)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body, err = io.ReadAll(quotedprintable.NewReader(m.Body))
	} else {
		body, err = io.ReadAll(m.Body)
	}
	if err != nil {
		t.Fatal(err)
	}
	return parsed{header: m.Header, subject: subject, body: strings.ReplaceAll(string(body), "\r\n", "\n")}
}

// selfSigned is a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sink.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestSMTPMailerSendsRFC5322(t *testing.T) {
	sink := newSMTPSink(t, nil, nil)
	m := &signup.SMTPMailer{Addr: sink.addr, From: "trawl <noreply@trawl.example>"}
	long := "https://eu.trawl.example/signup/verify?token=" + strings.Repeat("abcdefghij", 20)
	body := "Grüße — hello,\n\n" + long + "\n\n.a line starting with a dot\n"
	before := time.Now().Add(-time.Second)
	if err := m.Send(context.Background(), "ann@example.com", "Vérifiez votre adresse", body); err != nil {
		t.Fatal(err)
	}
	msgs := sink.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	got := msgs[0]
	if got.from != "noreply@trawl.example" || len(got.to) != 1 || got.to[0] != "ann@example.com" || got.tls {
		t.Fatalf("envelope %+v", got)
	}
	p := parseMail(t, got.data)
	if d, err := p.header.Date(); err != nil || d.Before(before) || d.After(time.Now().Add(time.Second)) {
		t.Errorf("Date %q: %v", p.header.Get("Date"), err)
	}
	if from, err := p.header.AddressList("From"); err != nil || len(from) != 1 || from[0].Address != "noreply@trawl.example" || from[0].Name != "trawl" {
		t.Errorf("From %q: %v", p.header.Get("From"), err)
	}
	if to, err := p.header.AddressList("To"); err != nil || len(to) != 1 || to[0].Address != "ann@example.com" {
		t.Errorf("To %q: %v", p.header.Get("To"), err)
	}
	if p.subject != "Vérifiez votre adresse" {
		t.Errorf("Subject %q decodes to %q", p.header.Get("Subject"), p.subject)
	}
	if !regexp.MustCompile(`^<[0-9a-f]{32}@trawl\.example>$`).MatchString(p.header.Get("Message-ID")) {
		t.Errorf("Message-ID %q", p.header.Get("Message-ID"))
	}
	if mt, params, err := mime.ParseMediaType(p.header.Get("Content-Type")); err != nil || mt != "text/plain" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Errorf("Content-Type %q", p.header.Get("Content-Type"))
	}
	if p.header.Get("MIME-Version") != "1.0" {
		t.Errorf("MIME-Version %q", p.header.Get("MIME-Version"))
	}
	if p.body != body {
		t.Errorf("body:\n%q\nwant\n%q", p.body, body)
	}
	for _, line := range strings.Split(string(got.data), "\r\n") {
		if len(line) > 78 {
			t.Errorf("line of %d characters on the wire: %q", len(line), line)
		}
	}
}

func TestSMTPMailerStartTLSAndAuth(t *testing.T) {
	cert, pool := selfSigned(t)
	sink := newSMTPSink(t, &tls.Config{Certificates: []tls.Certificate{cert}}, map[string]string{"trawl": "s3cret"})
	m := &signup.SMTPMailer{Addr: sink.addr, From: "noreply@trawl.example", Username: "trawl", Password: "s3cret",
		TLSConfig: &tls.Config{RootCAs: pool}}
	if err := m.Send(context.Background(), "ann@example.com", "hi", "body\n"); err != nil {
		t.Fatal(err)
	}
	if got := sink.messages(); len(got) != 1 || !got[0].tls || got[0].user != "trawl" {
		t.Fatalf("received %+v: want one message over TLS, logged in", got)
	}

	bad := *m
	bad.Password = "wrong"
	if err := bad.Send(context.Background(), "ann@example.com", "hi", "body\n"); err == nil || !strings.Contains(err.Error(), "auth") {
		t.Fatalf("wrong password: %v", err)
	}
	untrusted := *m
	untrusted.TLSConfig = nil // the system's roots do not know this certificate
	if err := untrusted.Send(context.Background(), "ann@example.com", "hi", "body\n"); err == nil || !strings.Contains(err.Error(), "starttls") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	if n := len(sink.messages()); n != 1 {
		t.Fatalf("%d messages after refused sends, want 1", n)
	}
}

func TestSMTPMailerRefusals(t *testing.T) {
	sink := newSMTPSink(t, nil, nil)
	ok := signup.SMTPMailer{Addr: sink.addr, From: "noreply@trawl.example"}
	for _, tc := range []struct {
		name             string
		m                signup.SMTPMailer
		to, subject, sub string
	}{
		{"bad from", signup.SMTPMailer{Addr: sink.addr, From: "noreply"}, "ann@example.com", "hi", "from"},
		{"bad to", ok, "ann", "hi", "to"},
		{"subject with a line break", ok, "ann@example.com", "hi\r\nBcc: eve@example.com", "line break"},
		{"no port", signup.SMTPMailer{Addr: "127.0.0.1", From: "noreply@trawl.example"}, "ann@example.com", "hi", "addr"},
		// Username set but the server offers no AUTH in plain text.
		{"auth unavailable", signup.SMTPMailer{Addr: sink.addr, From: "noreply@trawl.example", Username: "u", Password: "p"}, "ann@example.com", "hi", "AUTH"},
	} {
		if err := tc.m.Send(context.Background(), tc.to, tc.subject, "body"); err == nil || !strings.Contains(err.Error(), tc.sub) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.sub)
		}
	}
	if n := len(sink.messages()); n != 0 {
		t.Fatalf("%d messages sent by refused sends", n)
	}
}

// A server that accepts the connection and never speaks: Send gives up when
// its context ends.
func TestSMTPMailerHonoursContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	m := &signup.SMTPMailer{Addr: ln.Addr().String(), From: "noreply@trawl.example"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := m.Send(ctx, "ann@example.com", "hi", "body"); err == nil {
		t.Fatal("Send to a silent server succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send took %s after its context ended", d)
	}
}

// The sign-up handler with the real SMTP mailer: the mail the server got
// carries a link that verifies.
func TestSignupMailOverSMTP(t *testing.T) {
	sink := newSMTPSink(t, nil, nil)
	e := newEnvWithMailer(t, &signup.SMTPMailer{Addr: sink.addr, From: "trawl <noreply@trawl.example>"})
	r := e.form("/signup", map[string][]string{"email": {"ann@example.com"}})
	if r.status != 200 || pageKey(r.body) == "" || !strings.Contains(r.body, `id="mail-sent"`) {
		t.Fatalf("sign-up: %d %s", r.status, r.body)
	}
	msgs := sink.messages()
	if len(msgs) != 1 || msgs[0].to[0] != "ann@example.com" {
		t.Fatalf("received %+v", msgs)
	}
	link := linkRE.FindString(parseMail(t, msgs[0].data).body)
	if link == "" {
		t.Fatal("no link in the mail")
	}
	if v := e.verify(link); v.status != 200 || pageKey(v.body) == "" {
		t.Fatalf("verify: %d %s", v.status, v.body)
	}
}
