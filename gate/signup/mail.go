package signup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
)

// Mailer sends one plain-text mail. Send must be safe for concurrent use.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// LogMailer writes mail to the log instead of sending it: a gate with no
// SMTP server configured (development) shows the verification link there,
// and the sign-up page says so instead of claiming a mail was sent.
type LogMailer struct{ Logger *slog.Logger }

// Send logs the mail.
func (m LogMailer) Send(_ context.Context, to, subject, body string) error {
	m.Logger.Warn("no SMTP server configured; this mail was not sent", "to", to, "subject", subject, "body", body)
	return nil
}

// ErrNoTLS is returned by SMTPMailer.Send when a server that is not on
// loopback does not offer STARTTLS (and AllowPlain is off).
var ErrNoTLS = errors.New("smtp server offers no STARTTLS")

// SMTPMailer sends mail through an SMTP server (a submission port or a
// relay). It uses STARTTLS whenever the server offers it, and sends in plain
// text only to a server on loopback (or with AllowPlain). It is safe for
// concurrent use: each Send is its own connection.
type SMTPMailer struct {
	// Addr is the server, host:port ("smtp.example.com:587").
	Addr string
	// From is the sender, an address with an optional name
	// ("trawl <noreply@trawl.example>"); its domain names the Message-ID
	// and the HELO.
	From string
	// Username and Password log in with AUTH PLAIN when Username is set
	// (only over TLS or to loopback).
	Username string
	Password string
	// TLSConfig is used for STARTTLS (nil: the system's roots); its
	// ServerName defaults to Addr's host.
	TLSConfig *tls.Config
	// AllowPlain sends without TLS to a server that is not on loopback and
	// offers no STARTTLS (a relay on a private network).
	AllowPlain bool
	// Timeout bounds one Send when ctx has no deadline (default 30 s).
	Timeout time.Duration
}

// Send delivers one message to the server.
func (m *SMTPMailer) Send(ctx context.Context, to, subject, body string) error {
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("smtp from %q: %w", m.From, err)
	}
	rcpt, err := mail.ParseAddress(to)
	if err != nil {
		return fmt.Errorf("smtp to %q: %w", to, err)
	}
	msg, err := buildMessage(from, rcpt, subject, body, time.Now())
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("smtp addr %q: %w", m.Addr, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := m.Timeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("smtp dial %s: %w", m.Addr, err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// A cancelled ctx interrupts whatever the conversation is waiting on.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp %s: %w", m.Addr, err)
	}
	defer c.Close()
	if err := m.converse(c, conn, host, from, rcpt, msg); err != nil {
		return fmt.Errorf("smtp %s: %w", m.Addr, err)
	}
	return nil
}

func (m *SMTPMailer) converse(c *smtp.Client, conn net.Conn, host string, from, rcpt *mail.Address, msg []byte) error {
	if err := c.Hello(addrDomain(from.Address)); err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := &tls.Config{}
		if m.TLSConfig != nil {
			cfg = m.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	} else if !m.AllowPlain && !isLoopback(conn.RemoteAddr()) {
		return ErrNoTLS
	}
	if m.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("server offers no AUTH but a username is configured")
		}
		if err := c.Auth(smtp.PlainAuth("", m.Username, m.Password, host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := c.Rcpt(rcpt.Address); err != nil {
		return fmt.Errorf("rcpt to: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return c.Quit()
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func addrDomain(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i+1 < len(addr) {
		return addr[i+1:]
	}
	return "localhost"
}

// buildMessage is an RFC 5322 message: Date, From, To, Subject, Message-ID,
// and a text/plain UTF-8 body in quoted-printable (any text, short lines).
func buildMessage(from, to *mail.Address, subject, body string, now time.Time) ([]byte, error) {
	if strings.ContainsAny(subject, "\r\n") {
		return nil, errors.New("mail subject has a line break")
	}
	id := make([]byte, 16)
	rand.Read(id)
	var b bytes.Buffer
	hdr := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	hdr("Date", now.Format(time.RFC1123Z))
	hdr("From", from.String())
	hdr("To", to.String())
	hdr("Subject", mime.QEncoding.Encode("utf-8", subject))
	hdr("Message-ID", "<"+hex.EncodeToString(id)+"@"+addrDomain(from.Address)+">")
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	// Line ends as the wire wants them, whatever the caller wrote.
	qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")))
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
