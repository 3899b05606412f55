package httpjson

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type req struct {
	URL  string   `json:"url"`
	URLs []string `json:"urls"`
	N    int      `json:"n"`
	On   bool     `json:"on"`
	Sub  struct {
		A string `json:"a"`
	} `json:"sub"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		body    string
		lenient bool
		problem Problem
		status  int
		msg     string
	}{
		{body: `{"url":"https://a.example/"}`},
		{body: `{"url":"x"}` + "\n\t "},
		{body: `{"url":"x","extra":1}`, lenient: true},
		{body: ``, problem: Empty, status: 400, msg: "request body is empty; send a JSON object"},
		{body: `{"url":` + strings.Repeat(" ", 100) + `"x"}`, problem: TooLarge, status: 413, msg: "request body is larger than 64 bytes"},
		{body: `{"url":5}`, problem: WrongType, status: 400, msg: "field url must be a string, not number"},
		{body: `{"urls":"a"}`, problem: WrongType, msg: "field urls must be an array, not string"},
		{body: `{"urls":[1]}`, problem: WrongType, msg: "field urls must be a string, not number"},
		{body: `{"n":"1"}`, problem: WrongType, msg: "field n must be a number, not string"},
		{body: `{"on":1}`, problem: WrongType, msg: "field on must be a boolean, not number"},
		{body: `{"n":1e400}`, problem: WrongType, msg: "field n is out of range: 1e400"},
		{body: `[1,2]`, problem: WrongType, msg: "request body must be a JSON object, not an array"},
		{body: `{"sub":[]}`, problem: WrongType, msg: "field sub must be an object, not array"},
		{body: `{"url":`, problem: Syntax, msg: "request body is not valid JSON: unexpected EOF"},
		{body: `{url}`, problem: Syntax, msg: "request body is not valid JSON: invalid character 'u' looking for beginning of object key string"},
		{body: `{"extra":1}`, problem: UnknownField, msg: `unknown field "extra"`},
		{body: `{} {}`, problem: Trailing, msg: "request body must hold a single JSON object"},
		{body: `{} x`, problem: Trailing, msg: "request body must hold a single JSON object"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		var dst req
		var err error
		if tt.lenient {
			err = DecodeLenient(httptest.NewRecorder(), r, 64, &dst)
		} else {
			err = Decode(httptest.NewRecorder(), r, 64, &dst)
		}
		if tt.problem == 0 {
			if err != nil {
				t.Errorf("%q: %v", tt.body, err)
			}
			continue
		}
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%q: error %v, want a *DecodeError", tt.body, err)
			continue
		}
		if de.Problem != tt.problem || (tt.status != 0 && de.Status() != tt.status) || de.Error() != tt.msg {
			t.Errorf("%q: problem %d status %d %q, want %d %d %q", tt.body, de.Problem, de.Status(), de.Error(), tt.problem, tt.status, tt.msg)
		}
	}
}

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	Error(w, http.StatusNotFound, "not_found", "no such job")
	if w.Code != 404 || w.Body.String() != `{"error":"not_found","message":"no such job"}`+"\n" {
		t.Errorf("%d %q", w.Code, w.Body.String())
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", h)
	}

	w = httptest.NewRecorder()
	w.Header().Set("Cache-Control", "public, max-age=300")
	Write(w, http.StatusOK, map[string]int{"a": 1})
	if w.Header().Get("Cache-Control") != "public, max-age=300" || w.Body.String() != `{"a":1}`+"\n" {
		t.Errorf("a handler's Cache-Control was replaced: %v %q", w.Header(), w.Body.String())
	}

	w = httptest.NewRecorder()
	Write(w, http.StatusOK, map[string]any{"f": func() {}})
	var body ErrorBody
	if w.Code != 500 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error != "internal" {
		t.Errorf("unencodable value: %d %q", w.Code, w.Body.String())
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{"": true, "application/json": true, "Application/JSON; charset=utf-8": true, "text/plain": false} {
		r := httptest.NewRequest("POST", "/", nil)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if IsJSON(r) != want {
			t.Errorf("%q: %v", ct, !want)
		}
	}
}
