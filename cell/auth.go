package cell

import (
	"context"
	"net/http"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
)

type accountKey struct{}

// accountOf is the account the gate signed the request for ("" for a
// call with none).
func accountOf(r *http.Request) string {
	a, _ := r.Context().Value(accountKey{}).(string)
	return a
}

// fromGate answers only requests its region's gate signed: the signature
// covers the method, the path and query, the account and the region's
// policy (internal/regionauth), and a nonce is accepted once. The answer
// is signed over that nonce, its status and its usage header, so the gate
// bills only what this cell reported for that request. The cell's own
// GET /health stays open: it tells an operator or a load balancer the
// cell's state and carries nothing of any account.
//
// A cell started with AllowPrivateNetworks serves only requests whose
// gate allows private networks too: a cell cannot turn off the SSRF guard
// of a region whose gate keeps it.
func (c *Cell) fromGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get(regionauth.HeaderAuth) == "" {
			next.ServeHTTP(w, r)
			return
		}
		claims, err := c.gate.Verify(r)
		if err != nil {
			c.cfg.Logger.Warn("refused a request its region's gate did not sign", "method", r.Method, "path", r.URL.Path,
				"from", r.RemoteAddr, "err", err)
			httpjson.Error(w, http.StatusUnauthorized, "unauthorized", "this cell answers only its region's gate")
			return
		}
		sw := &signingWriter{ResponseWriter: w, keys: c.gate.Keys(), nonce: claims.Nonce}
		if c.cfg.AllowPrivateNetworks && !claims.Private {
			c.cfg.Logger.Error("this cell allows private networks and its region's gate does not: refusing its requests; restart the cell without --allow-private-networks")
			httpjson.Error(sw, http.StatusServiceUnavailable, "cell_misconfigured", "a cell of this region is misconfigured; the request was not served")
			return
		}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accountKey{}, claims.Account)))
	})
}

// signingWriter signs the answer when its header is written.
type signingWriter struct {
	http.ResponseWriter
	keys  *regionauth.Keys
	nonce string
	wrote bool
}

func (w *signingWriter) WriteHeader(status int) {
	if status >= 200 && !w.wrote {
		w.wrote = true
		h := w.Header()
		h.Set(regionauth.HeaderUsageSig, w.keys.SignAnswer(w.nonce, status, h.Get(metering.Header)))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *signingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (batches
// flush each line).
func (w *signingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
