package monstore

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// MailPrefix + id: a confirmed change's mail to notify.email, waiting to
// be sent (Mail as JSON).
const MailPrefix = store.PrefixMonitor + "mail/"

// Mail is one notify.email message of a confirmed change. The checking
// cell writes it in the same batch as the confirmation; the store's owner
// (the region's gate) sends it with the sign-up mail's SMTP settings.
type Mail struct {
	ID       string          `json:"id"`
	Monitor  string          `json:"monitor"`
	Event    int64           `json:"event"`
	To       string          `json:"to"`
	Subject  string          `json:"subject"`
	Body     string          `json:"body"`
	Attempts int             `json:"attempts"`
	NextAt   time.Time       `json:"next_at"`
	Schedule []time.Duration `json:"schedule"`
	// LastError is why the last attempt failed.
	LastError string `json:"last_error,omitempty"`
}

// MailID names the mail of event n of monitor.
func MailID(monitor string, n int64) string { return "mm_" + monitor + "_" + strconv.FormatInt(n, 10) }

// Mailer sends one plain-text mail (gate/signup.SMTPMailer).
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// ErrNoMailer is the failure of a mail on a gate without an SMTP server.
var ErrNoMailer = errors.New("no SMTP server is configured")

// MailConfig configures RunMail.
type MailConfig struct {
	// Mailer sends; nil: no SMTP server is configured, and every mail is
	// recorded as failed (never claimed as sent).
	Mailer Mailer
	Now    func() time.Time
	Logger *slog.Logger
}

// RunMail sends the waiting mails until ctx ends: at once when a batch
// writes one, and every second for retries. An attempt that fails is
// retried on the mail's schedule, then given up; the final state is
// written on the event (delivery.email).
func (l *Local) RunMail(ctx context.Context, cfg MailConfig) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		l.sendMails(ctx, &cfg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.mailWake:
		}
	}
}

func (l *Local) sendMails(ctx context.Context, cfg *MailConfig) {
	now := cfg.Now()
	var due []Mail
	err := l.st.Scan([]byte(MailPrefix), nil, func(_, v []byte) (bool, error) {
		var m Mail
		if err := json.Unmarshal(v, &m); err != nil {
			return false, err
		}
		if !m.NextAt.After(now) {
			due = append(due, m)
		}
		return true, nil
	})
	if err != nil {
		cfg.Logger.Error("monitor mail: read", "err", err)
		return
	}
	for _, m := range due {
		if ctx.Err() != nil {
			return
		}
		err := ErrNoMailer
		if cfg.Mailer != nil {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = cfg.Mailer.Send(sctx, m.To, m.Subject, m.Body)
			cancel()
		}
		if ctx.Err() != nil {
			return // stopping: the mail stays due
		}
		m.Attempts++
		key := []byte(MailPrefix + m.ID)
		at := cfg.Now().UTC().Format(time.RFC3339)
		switch {
		case err == nil:
			l.finishMail(key, &m, "delivered", at)
		case errors.Is(err, ErrNoMailer) || m.Attempts > len(m.Schedule):
			cfg.Logger.Warn("monitor mail: given up", "mail", m.ID, "attempts", m.Attempts, "err", err)
			l.finishMail(key, &m, "failed", at)
		default:
			m.LastError = err.Error()
			m.NextAt = cfg.Now().Add(m.Schedule[m.Attempts-1])
			cfg.Logger.Info("monitor mail: attempt failed; retrying", "mail", m.ID, "attempt", m.Attempts, "next_at", m.NextAt, "err", err)
			raw, _ := json.Marshal(m)
			if err := l.st.Set(key, raw, store.Sync); err != nil {
				cfg.Logger.Error("monitor mail: store", "mail", m.ID, "err", err)
			}
		}
	}
}

func (l *Local) finishMail(key []byte, m *Mail, status, at string) {
	if err := l.st.Delete(key, store.Sync); err != nil {
		return
	}
	l.recordState(m.Monitor, m.Event, "email", map[string]any{"status": status, "attempts": m.Attempts, "at": at})
}
