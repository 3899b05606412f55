package payments

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/routes"
)

// Handler serves the checkout pages of Local: GET shows the session (price,
// credits, state) with a Confirm button; POST confirms it (with the
// operator token when LocalConfig.ConfirmToken is set), marks it paid and
// redirects to the session's success URL, or back to the page. Mount it
// unstripped on the route table's row of CheckoutPath (internal/routes,
// with routes.Mux): the form is read within the row's BodyLimit.
// Cross-origin POSTs from browsers are refused.
func (l *Local) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CheckoutPath+"{session}", l.servePage)
	mux.HandleFunc("POST "+CheckoutPath+"{session}", l.serveConfirm)
	return http.NewCrossOriginProtection().Handler(mux)
}

func (l *Local) servePage(w http.ResponseWriter, r *http.Request) {
	s, err := l.store.Get(r.Context(), r.PathValue("session"))
	if err != nil {
		l.renderErr(w, err)
		return
	}
	status := http.StatusOK
	if l.expired(s) {
		status = http.StatusGone
	}
	l.render(w, status, s, "")
}

func (l *Local) serveConfirm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session")
	r.Body = http.MaxBytesReader(w, r.Body, routes.Limit(r))
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if tok := l.cfg.ConfirmToken; tok != "" &&
		subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(tok)) != 1 {
		s, err := l.store.Get(r.Context(), id)
		if err != nil {
			l.renderErr(w, err)
			return
		}
		l.render(w, http.StatusForbidden, s, "Wrong operator token: the payment was not confirmed.")
		return
	}
	s, err := l.confirm(r.Context(), id)
	switch {
	case errors.Is(err, errExpired):
		l.render(w, http.StatusGone, s, "")
		return
	case err != nil:
		l.renderErr(w, err)
		return
	}
	next := r.URL.Path
	if s.SuccessURL != "" {
		next = successURL(s)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func successURL(s Session) string {
	return strings.ReplaceAll(s.SuccessURL, "{CHECKOUT_SESSION_ID}", s.ID)
}

type pageData struct {
	USD                   int
	Credits               string
	Paid, Expired         bool
	PaidAt                string
	PaymentID             string
	SuccessURL, CancelURL string
	NeedToken             bool
	Error                 string
}

func (l *Local) render(w http.ResponseWriter, status int, s Session, msg string) {
	d := pageData{
		USD:       s.USD,
		Credits:   formatCredits(s.Credits),
		Paid:      !s.PaidAt.IsZero(),
		Expired:   l.expired(s),
		PaymentID: s.PaymentID,
		CancelURL: s.CancelURL,
		NeedToken: l.cfg.ConfirmToken != "",
		Error:     msg,
	}
	if d.Paid {
		d.PaidAt = s.PaidAt.UTC().Format(time.RFC3339)
		d.SuccessURL = successURL(s)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, d) // fails only when the client has gone
}

func (l *Local) renderErr(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoSession) {
		http.Error(w, "no such checkout", http.StatusNotFound)
		return
	}
	l.log.Error("checkout page", "err", err)
	http.Error(w, "checkout store failed", http.StatusInternalServerError)
}

var pageTmpl = template.Must(template.New("checkout").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trawl top-up</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}
.amount{font-size:1.5rem}.error{color:#b00}button{font-size:1rem;padding:.4rem 1rem}</style>
</head>
<body>
<h1>Credit top-up</h1>
<p class="amount">${{.USD}} for {{.Credits}} credits</p>
{{- if .Paid}}
<p id="status">Paid on {{.PaidAt}} (payment {{.PaymentID}}).</p>
{{- if .SuccessURL}}
<p><a href="{{.SuccessURL}}">Continue</a></p>
{{- end}}
{{- else if .Expired}}
<p id="status">This checkout has expired; start a new top-up.</p>
{{- else}}
<p id="status">Waiting for the operator to confirm the payment.</p>
{{- if .Error}}
<p class="error" role="alert">{{.Error}}</p>
{{- end}}
<form method="post">
{{- if .NeedToken}}
<p><label>Operator token <input type="password" name="token" autocomplete="off" required></label></p>
{{- end}}
<p><button type="submit" name="confirm" value="1">Confirm payment</button></p>
</form>
{{- if .CancelURL}}
<p><a href="{{.CancelURL}}">Cancel</a></p>
{{- end}}
{{- end}}
</body>
</html>
`))
