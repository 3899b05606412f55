package signup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/clientip"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Pages.
const (
	pageForm     = "form"
	pagePass     = "pass"
	pageConfirm  = "confirm"
	pageVerified = "verified"
	pageAlready  = "already"
	pageError    = "error"
)

// pageData is what every page template reads.
type pageData struct {
	Title string
	Error string
	Note  string
	Email string
	// Key is shown once, in #api-key.
	Key           string
	Token         string
	MailSent      bool
	MailLogged    bool // no SMTP server: the link is in the gate's log
	PassHours     int
	PassCredits   string
	PassDays      int
	SignupCredits string
	BaseURL       string
}

const layoutHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}} · trawl</title>
<style>
:root { color-scheme: light dark; --fg: #1d232b; --muted: #5b6572; --bg: #f6f7f9; --card: #fff; --line: #d9dde3; --accent: #1f6feb; --bad: #b42318; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ee; --muted: #9aa4b1; --bg: #0f1318; --card: #171c23; --line: #2a313b; --accent: #4c8dff; --bad: #ff7a6e; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 34rem; margin: 4rem auto; padding: 2rem; background: var(--card); border: 1px solid var(--line); border-radius: 12px; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
p { margin: 0 0 1rem; }
.muted { color: var(--muted); font-size: .9rem; }
.error { color: var(--bad); font-weight: 600; }
label { display: block; font-weight: 600; margin-bottom: .35rem; }
input[type=email] { width: 100%; padding: .65rem .75rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: 8px; }
button { margin-top: 1rem; padding: .65rem 1.1rem; font: inherit; font-weight: 600; color: #fff; background: var(--accent); border: 0; border-radius: 8px; cursor: pointer; }
code, pre { font: .9rem/1.4 ui-monospace, "SFMono-Regular", Menlo, monospace; }
.key { display: block; padding: .75rem; margin: .5rem 0 1rem; background: var(--bg); border: 1px dashed var(--accent); border-radius: 8px; word-break: break-all; user-select: all; }
pre { padding: .75rem; background: var(--bg); border-radius: 8px; overflow-x: auto; }
</style>
</head>
<body><main>
<h1>{{.Title}}</h1>
{{template "body" .}}
</main></body>
</html>
`

var pageBodies = map[string]string{
	pageForm: `<p>Get an API key for trawl. You get a 24-hour pass key at once; verify your e-mail address for a permanent key and {{.SignupCredits}} free credits.</p>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
<form method="post" action="/signup">
<label for="email">E-mail address</label>
<input type="email" id="email" name="email" value="{{.Email}}" required autocomplete="email" maxlength="254" autofocus>
<button type="submit" id="submit">Get my key</button>
</form>`,

	pagePass: `<p>It works for {{.PassHours}} hours and comes with {{.PassCredits}} credits. <strong>It is shown only once:</strong> copy it now.</p>
<code class="key" id="api-key">{{.Key}}</code>
{{if .MailLogged}}<p id="mail-logged">This server sends no mail (no SMTP server is configured): the verification link for <strong>{{.Email}}</strong> is in the gate's log. Its operator can give it to you; opening it gets a permanent key and {{.SignupCredits}} free credits.</p>
{{else if .MailSent}}<p id="mail-sent">We sent a link to <strong>{{.Email}}</strong>. Open it to get a permanent key and {{.SignupCredits}} free credits; the pass key then stops working.</p>
{{else}}<p class="error" id="mail-failed">We could not send the mail to {{.Email}} just now. Your pass key works; sign up again in a few minutes to get a new link.</p>{{end}}
<p>Try it:</p>
<pre>curl -H "Authorization: Bearer {{.Key}}" {{.BaseURL}}/v1/billing/balance</pre>`,

	pageConfirm: `<p>Verify <strong>{{.Email}}</strong> to get your permanent key and {{.SignupCredits}} free credits. Your pass key stops working then.</p>
<form method="post" action="/signup/verify">
<input type="hidden" name="token" value="{{.Token}}">
<button type="submit" id="verify">Verify and show my key</button>
</form>
<p class="muted">The key is shown once, on the next page.</p>`,

	pageVerified: `<p><strong>{{.Email}}</strong> is verified. This is your permanent key; <strong>it is shown only once:</strong> copy it now.</p>
<code class="key" id="api-key">{{.Key}}</code>
{{if .Note}}<p class="error" id="note">{{.Note}}</p>{{end}}
<p>Your pass key no longer works. {{.SignupCredits}} free credits are on your account. Manage your keys with <code>GET /v1/keys</code>, <code>POST /v1/keys</code> and <code>DELETE /v1/keys/{id}</code>.</p>
<pre>curl -H "Authorization: Bearer {{.Key}}" {{.BaseURL}}/v1/billing/balance</pre>`,

	pageAlready: `<p id="already-verified">{{if .Email}}<strong>{{.Email}}</strong>{{else}}This address{{end}} is already verified.</p>
<p>{{if .Note}}{{.Note}}{{else}}Your permanent key was shown once, when the address was verified. Any key of your account can make a new one: <code>POST /v1/keys</code>.{{end}}</p>`,

	pageError: `<p class="error" id="error">{{.Error}}</p>
<p><a href="/signup">Back to sign-up</a></p>`,
}

var pages = func() map[string]*template.Template {
	base := template.Must(template.New("layout").Parse(layoutHTML))
	out := map[string]*template.Template{}
	for name, body := range pageBodies {
		out[name] = template.Must(template.Must(base.Clone()).New("body").Parse(body))
	}
	return out
}()

// render writes a page. Pages may carry a key or a token: nothing is cached,
// framed or sent on as a referrer.
func (h *handler) render(w http.ResponseWriter, status int, name string, d pageData) {
	d.BaseURL = h.cfg.BaseURL
	g := h.bc.CurrentPrices().Grants
	d.PassHours = int(billing.PassTTL / time.Hour)
	d.PassCredits = credits(g.Pass.Credits)
	d.PassDays = g.Pass.Days
	d.SignupCredits = credits(g.Signup)
	var b bytes.Buffer
	if err := pages[name].ExecuteTemplate(&b, "layout", d); err != nil {
		h.bc.Logger.Error("signup: render page", "page", name, "err", err)
		http.Error(w, "something went wrong on our side; try again", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// credits is an amount for people: "100", "2.5".
func credits(a billing.Amount) string {
	return strings.TrimSuffix(strings.TrimRight(a.String(), "0"), ".")
}

// GET /signup
func (h *handler) signupForm(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, pageForm, pageData{Title: "Sign up"})
}

// Errors of normalizeEmail.
var (
	errNoEmail  = errors.New("no e-mail address")
	errBadEmail = errors.New("not an e-mail address we can send to")
)

// emailProblem is the form's sentence for a normalizeEmail error.
func emailProblem(err error) string {
	if errors.Is(err, errNoEmail) {
		return "Enter your e-mail address."
	}
	return "That is not an e-mail address we can send to: use the form name@example.com."
}

// normalizeEmail accepts a bare address (no display name, a domain with a
// dot) and lower-cases its domain.
func normalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errNoEmail
	}
	if len(s) > 254 {
		return "", errBadEmail
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || strings.ContainsAny(s, "<>\"") {
		return "", errBadEmail
	}
	i := strings.LastIndexByte(s, '@')
	local, domain := s[:i], strings.ToLower(s[i+1:])
	if local == "" || !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") ||
		strings.Contains(domain, "..") || strings.HasPrefix(domain, "[") {
		return "", errBadEmail
	}
	return local + "@" + domain, nil
}

// POST /signup: an account, its pass key and pass credit, and the mail.
func (h *handler) signup(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, routes.Limit(r))
	if err := r.ParseForm(); err != nil {
		h.render(w, http.StatusBadRequest, pageForm, pageData{Title: "Sign up", Error: "The form did not arrive whole; try again."})
		return
	}
	email, err := normalizeEmail(r.PostForm.Get("email"))
	if err != nil {
		h.render(w, http.StatusBadRequest, pageForm, pageData{Title: "Sign up", Error: emailProblem(err), Email: r.PostForm.Get("email")})
		return
	}
	if h.perAddr != nil {
		// The address Caddy found behind the trusted proxies; an IPv6
		// /64 is one address.
		if lc, err := h.perAddr.Get(r.Context(), clientip.Bucket(clientip.Of(r))); err == nil && lc.Reached {
			w.Header().Set("Retry-After", strconv.FormatInt(max(lc.Reset-h.bc.Now().Unix(), 1), 10))
			h.render(w, http.StatusTooManyRequests, pageForm, pageData{Title: "Sign up", Email: email,
				Error: "Too many sign-ups from your network address in the last hour; try again later."})
			return
		}
	}
	acct, secret, ref := h.createAccount(r, email)
	if ref != nil {
		h.render(w, ref.status, ref.page, ref.data)
		return
	}
	now := h.bc.Now().UTC()
	p := h.bc.CurrentPrices()
	tok := SignToken(h.cfg.TokenSecret, Token{Account: acct, Email: email, Expires: now.Add(h.cfg.TokenTTL)})
	link := h.cfg.BaseURL + "/signup/verify?token=" + url.QueryEscape(tok)
	// The account exists: send the mail even if the browser goes away.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.MailTimeout)
	defer cancel()
	mailErr := h.cfg.Mailer.Send(mctx, email, "Verify your e-mail address for trawl", verifyMail(link, h.cfg.TokenTTL, credits(p.Grants.Signup)))
	if mailErr != nil {
		h.bc.Logger.Warn("signup: send verification mail", "account", acct, "err", mailErr)
	}
	_, logged := h.cfg.Mailer.(LogMailer)
	h.bc.Logger.Info("signup", "account", acct, "mail_sent", mailErr == nil && !logged)
	h.render(w, http.StatusOK, pagePass, pageData{Title: "Your pass key", Email: email, Key: secret, MailSent: mailErr == nil, MailLogged: logged})
}

// refusal is the page to answer with instead of an account.
type refusal struct {
	status int
	page   string
	data   pageData
}

// createAccount checks the address may sign up and makes the account, its
// spend cap, its pass key and pass credit; or says which page to show
// instead.
func (h *handler) createAccount(r *http.Request, email string) (acct, secret string, ref *refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.bc.Now().UTC()
	accts, err := h.bc.State.AccountsByEmail(email)
	if err != nil {
		return "", "", h.internalRefusal("accounts by email", err)
	}
	pending := 0
	for _, a := range accts {
		keys, err := h.bc.State.AccountKeys(a.ID)
		if err != nil {
			return "", "", h.internalRefusal("account keys", err)
		}
		if verified(keys) {
			return "", "", &refusal{http.StatusConflict, pageAlready, pageData{Title: "Already verified", Email: email,
				Note: "An account with this address exists already. Use its permanent key; any key of the account can make a new one with POST /v1/keys."}}
		}
		if now.Sub(a.CreatedAt) < pendingWindow {
			pending++
		}
	}
	if pending >= maxPending {
		return "", "", &refusal{http.StatusTooManyRequests, pageForm, pageData{Title: "Sign up", Email: email,
			Error: "This address was signed up several times today without being verified. Open the link in one of the mails we sent, or try again tomorrow."}}
	}

	p := h.bc.CurrentPrices()
	acct = newID("acct_")
	secret, key := newKey(acct, KindPass, now.Add(billing.PassTTL))
	cmds := []*ledger.Command{
		{ID: "signup/" + acct + "/account", Type: ledger.CmdCreateAccount, CreateAccount: &ledger.CreateAccount{Account: acct, Email: email, Plan: ledger.PlanFree}},
	}
	if limits, ok := p.Plans[ledger.PlanFree]; ok && limits.MonthlyCap > 0 {
		c := limits.MonthlyCap.MC()
		cmds = append(cmds, &ledger.Command{ID: "signup/" + acct + "/settings", Type: ledger.CmdSettings, Settings: &ledger.Settings{Account: acct, SpendCapMC: &c}})
	}
	cmds = append(cmds, &ledger.Command{ID: "signup/" + acct + "/pass_key", Type: ledger.CmdAddKey, AddKey: key})
	if g := p.Grants.Pass; g.Credits > 0 && g.Days > 0 {
		cmds = append(cmds, &ledger.Command{ID: "signup/" + acct + "/pass_grant", Type: ledger.CmdGrant, Grant: &ledger.Grant{
			Account: acct, Bucket: ledger.BucketPass, Amount: g.Credits.MC(), PassExpires: now.Add(time.Duration(g.Days) * 24 * time.Hour),
		}})
	}
	for _, c := range cmds {
		c.Time = now
		if _, err := h.submit(r.Context(), c); err != nil {
			if errors.Is(err, errRefused) {
				return "", "", h.internalRefusal("sign-up command", err)
			}
			h.bc.Logger.Warn("signup: ledger", "err", err)
			return "", "", &refusal{http.StatusServiceUnavailable, pageForm, pageData{Title: "Sign up", Email: email,
				Error: "We could not create your key just now (our ledger did not answer). Nothing usable was made; try again in a minute."}}
		}
	}
	return acct, secret, nil
}

func verifyMail(link string, ttl time.Duration, signupCredits string) string {
	return fmt.Sprintf(`Hello,

someone (we hope you) signed up for trawl with this address.

Open this link to verify it. You get a permanent API key and %s free
credits; the 24-hour pass key you were shown stops working then.

%s

The link works for %d hours. If you did not sign up, ignore this mail:
nothing happens without the link.

-- trawl
`, signupCredits, link, int(ttl/time.Hour))
}

// tokenError is the page for a link that does not work.
func (h *handler) tokenError(w http.ResponseWriter, err error) {
	msg := "This verification link is not valid. Copy the whole link from the mail, or sign up again for a new one."
	if errors.Is(err, ErrTokenExpired) {
		msg = fmt.Sprintf("This verification link has expired (links work for %d hours). Sign up again for a new one.", int(h.cfg.TokenTTL/time.Hour))
	}
	h.render(w, http.StatusBadRequest, pageError, pageData{Title: "Link not valid", Error: msg})
}

// checkToken reads the token of r and the account it names; false when it
// has answered.
func (h *handler) checkToken(w http.ResponseWriter, s string) (Token, *ledger.Account, []*ledger.Key, bool) {
	tok, err := ParseToken(h.cfg.TokenSecret, s, h.bc.Now())
	if err != nil {
		h.tokenError(w, err)
		return tok, nil, nil, false
	}
	a, err := h.bc.State.Account(tok.Account)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && !strings.EqualFold(a.Email, tok.Email)) {
		h.tokenError(w, ErrTokenInvalid)
		return tok, nil, nil, false
	}
	if err != nil {
		h.pageInternal(w, "read account", err)
		return tok, nil, nil, false
	}
	keys, err := h.bc.State.AccountKeys(a.ID)
	if err != nil {
		h.pageInternal(w, "account keys", err)
		return tok, nil, nil, false
	}
	return tok, a, keys, true
}

// GET /signup/verify?token=…: a button, not the verification itself, so a
// mail scanner that follows links cannot use up the once-shown key.
func (h *handler) verifyForm(w http.ResponseWriter, r *http.Request) {
	s := r.URL.Query().Get("token")
	tok, _, keys, ok := h.checkToken(w, s)
	if !ok {
		return
	}
	if verified(keys) {
		h.render(w, http.StatusOK, pageAlready, pageData{Title: "Already verified", Email: tok.Email})
		return
	}
	h.render(w, http.StatusOK, pageConfirm, pageData{Title: "Verify your e-mail address", Email: tok.Email, Token: s})
}

// POST /signup/verify (token): a permanent key, the sign-up credit, the pass
// keys revoked. The commands' ids are fixed per account, so a second visit
// (or two at once) grants nothing twice and shows no key.
func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, routes.Limit(r))
	if err := r.ParseForm(); err != nil {
		h.tokenError(w, ErrTokenInvalid)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tok, a, keys, ok := h.checkToken(w, r.PostForm.Get("token"))
	if !ok {
		return
	}
	now := h.bc.Now().UTC()
	var secret string
	if !verified(keys) {
		var key *ledger.Key
		secret, key = newKey(a.ID, KindPermanent, time.Time{})
		res, err := h.submit(r.Context(), &ledger.Command{ID: "signup/verify/" + a.ID + "/key", Type: ledger.CmdAddKey, Time: now, AddKey: key})
		if errors.Is(err, errRefused) {
			h.pageInternal(w, "verify command", err)
			return
		}
		if err != nil {
			h.bc.Logger.Warn("signup: verify", "account", a.ID, "err", err)
			h.render(w, http.StatusServiceUnavailable, pageError, pageData{Title: "Try again",
				Error: "We could not verify your address just now (our ledger did not answer). Open the link again in a minute."})
			return
		}
		if res.Duplicate {
			secret = "" // an earlier visit made the key
		}
	}
	// Finish what verification does even on a later visit: an earlier one
	// may have been cut short after making the key.
	var note string
	if err := h.finishVerify(r, a, keys, now); err != nil {
		h.bc.Logger.Warn("signup: finish verify", "account", a.ID, "err", err)
		note = "Your sign-up credit is not on the account yet (our ledger did not answer). Open the link again in a few minutes to finish; your key works already."
	}
	if secret == "" {
		h.render(w, http.StatusOK, pageAlready, pageData{Title: "Already verified", Email: tok.Email, Note: note})
		return
	}
	h.bc.Logger.Info("signup verified", "account", a.ID)
	h.render(w, http.StatusOK, pageVerified, pageData{Title: "Your permanent key", Email: tok.Email, Key: secret, Note: note})
}

// finishVerify grants the sign-up credit and revokes the pass keys.
func (h *handler) finishVerify(r *http.Request, a *ledger.Account, keys []*ledger.Key, now time.Time) error {
	if amt := h.bc.CurrentPrices().Grants.Signup.MC(); amt > 0 {
		if _, err := h.submit(r.Context(), &ledger.Command{ID: "signup/verify/" + a.ID + "/grant", Type: ledger.CmdGrant, Time: now,
			Grant: &ledger.Grant{Account: a.ID, Bucket: ledger.BucketSignup, Amount: amt}}); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if k.Kind != KindPass || k.Revoked {
			continue
		}
		if _, err := h.submit(r.Context(), &ledger.Command{ID: "signup/verify/" + a.ID + "/revoke/" + k.ID, Type: ledger.CmdRevokeKey, Time: now,
			RevokeKey: &ledger.RevokeKey{KeyID: k.ID}}); err != nil {
			return err
		}
	}
	return nil
}

func (h *handler) internalRefusal(what string, err error) *refusal {
	h.bc.Logger.Error("signup: "+what, "err", err)
	return &refusal{http.StatusInternalServerError, pageError, pageData{Title: "Something went wrong", Error: "Something went wrong on our side; try again."}}
}

func (h *handler) pageInternal(w http.ResponseWriter, what string, err error) {
	h.bc.Logger.Error("signup: "+what, "err", err)
	h.render(w, http.StatusInternalServerError, pageError, pageData{Title: "Something went wrong", Error: "Something went wrong on our side; try again."})
}
