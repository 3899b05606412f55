package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/ledger"
)

// maxLine bounds one NDJSON line of a per-line answer (a page's result
// with its HTML and Markdown); a longer line ends the answer.
const maxLine = 16 << 20

// errStopped ends the proxy's copy of an answer the meter has stopped.
var errStopped = errors.New("meter: answer stopped")

// lineMeter bills an NDJSON answer line by line (metering.Usage.PerLine).
// Each complete line from the cell begins with its usage and that usage's
// signature (metering.LinePrefix); the meter checks the signature, charges
// the line, puts the public usage object (docs/spec/hosted-api.md §2.8) in place of the two
// and only then passes the line on. A line the cell never finished (it
// died mid-stream) is neither charged nor sent; a refused charge ends the
// answer with the refusal as its last line. The total cost and the balance
// are the answer's trailers.
type lineMeter struct {
	w       *writer
	kind    string
	buf     []byte
	n       int // lines passed on
	total   ledger.MC
	stopped bool
}

func (l *lineMeter) write(p []byte) (int, error) {
	if l.stopped {
		return 0, errStopped
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(l.buf)+len(p) > maxLine {
				l.stop(gate.Refuse(http.StatusBadGateway, "cell_unavailable", "a line of the answer was too long; the lines not received were not charged"))
				return 0, errStopped
			}
			l.buf = append(l.buf, p...)
			break
		}
		line := p[:i]
		if len(l.buf) > 0 {
			l.buf = append(l.buf, line...)
			line = l.buf
		}
		p = p[i+1:]
		if err := l.line(line); err != nil {
			return 0, err
		}
		l.buf = l.buf[:0]
	}
	return n, nil
}

// line checks, charges and passes on one complete line.
func (l *lineMeter) line(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	raw, sig, rest, ok := splitLine(line)
	a := l.w.answer
	if !ok || a == nil || a.Keys == nil || !a.Keys.VerifyAnswer(metering.LineNonce(a.Nonce, l.n), http.StatusOK, string(raw), sig) {
		l.w.m.rt.Logger().Error("meter: a line's usage is not signed by a cell of the region; answer stopped", "line", l.n)
		l.stop(gate.Refuse(http.StatusBadGateway, "cell_unavailable",
			"a line of the answer could not be verified, so the answer was stopped; the lines not received were not charged"))
		return errStopped
	}
	u, err := metering.Parse(string(raw))
	if err != nil {
		l.stop(gate.Refuse(http.StatusBadGateway, "cell_unavailable", "a line of the answer could not be read; the lines not received were not charged"))
		return errStopped
	}
	if u.Kind == "" {
		u.Kind = l.kind
	}
	count := 1
	if u.Count != nil {
		count = *u.Count
	}
	price, rec, err := l.w.charge(u, count, lineURL(rest), http.StatusOK)
	if err != nil {
		l.stop(l.w.m.refusalOf(l.w.id, err))
		return errStopped
	}
	l.total += price
	out := make([]byte, 0, len(line)+256)
	out = append(out, `{"usage":`...)
	if rec != nil {
		obj, _ := json.Marshal(rec.Object())
		out = append(out, obj...)
	} else {
		out = append(out, `{"units":"0.000","boxes":[],"count":0}`...)
	}
	out = append(append(append(out, ','), rest...), '\n')
	l.n++
	if _, err := l.w.ResponseWriter.Write(out); err != nil {
		l.stopped = true
		return err
	}
	http.NewResponseController(l.w.ResponseWriter).Flush()
	return nil
}

// stop ends the answer with ref's body as its last line.
func (l *lineMeter) stop(ref *gate.Refusal) {
	if l.stopped {
		return
	}
	l.stopped = true
	b, _ := json.Marshal(ref.Body)
	l.w.ResponseWriter.Write(append(b, '\n'))
}

// finish sends the trailers, and a last line when the cell's answer ended
// before every URL had its line (the cell died, or the proxy failed).
func (l *lineMeter) finish(proxyErr error) {
	if !l.stopped && (proxyErr != nil || l.n < l.w.call.count) {
		l.stop(gate.Refuse(http.StatusBadGateway, "cell_unavailable",
			"the answer stopped after "+strconv.Itoa(l.n)+" of "+strconv.Itoa(l.w.call.count)+
				" lines: the lines not received were not charged; repeat the call for the URLs without a line"))
	}
	h := l.w.Header()
	h.Set(HeaderCost, l.total.String())
	if bal, err := l.w.m.rt.Balance(l.w.id.Account); err == nil {
		h.Set(HeaderBalance, bal.String())
	}
}

// splitLine takes a cell's line apart: its usage (JSON), the usage's
// signature, and the line's own members after them (`"url":…}`).
func splitLine(line []byte) (raw []byte, sig string, rest []byte, ok bool) {
	body, ok := bytes.CutPrefix(line, []byte(metering.LinePrefix))
	if !ok {
		return nil, "", nil, false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	var u json.RawMessage
	if d.Decode(&u) != nil {
		return nil, "", nil, false
	}
	after, ok := bytes.CutPrefix(body[d.InputOffset():], []byte(metering.LineSig))
	if !ok {
		return nil, "", nil, false
	}
	end := bytes.IndexByte(after, '"')
	if end < 0 || len(after) < end+2 || after[end+1] != ',' {
		return nil, "", nil, false
	}
	return u, string(after[:end]), after[end+2:], true
}

// lineURL reads the url member that begins a line's own members.
func lineURL(rest []byte) string {
	v, ok := bytes.CutPrefix(rest, []byte(`"url":`))
	if !ok {
		return ""
	}
	var s string
	if json.NewDecoder(bytes.NewReader(v)).Decode(&s) != nil {
		return ""
	}
	return s
}
