package routes

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMux(t *testing.T) {
	rows := []Route{
		{Pattern: "GET /things/{id}", Server: Cell, BodyLimit: 0},
		{Pattern: "PATCH /things/{id}", Server: Cell, BodyLimit: 128},
		{Pattern: "/other/", Server: Cell, BodyLimit: 7},
	}
	seen := func(w http.ResponseWriter, r *http.Request) {
		row := From(r.Context())
		io.WriteString(w, row.Pattern+" "+r.PathValue("id"))
		if Limit(r) != row.BodyLimit {
			t.Errorf("%s: Limit %d", row.Pattern, Limit(r))
		}
	}
	hs := Handlers{"GET /things/{id}": http.HandlerFunc(seen), "PATCH /things/{id}": http.HandlerFunc(seen), "/other/": http.HandlerFunc(seen)}
	mux, err := Mux(rows, hs, MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/things/a", "GET /things/{id} a"},
		{"HEAD", "/things/a", "GET /things/{id} a"}, // the server drops a HEAD body; the recorder keeps it
		{"PATCH", "/things/b", "PATCH /things/{id} b"},
		{"PUT", "/other/x/y", "/other/ "},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code != 200 || w.Body.String() != tt.want {
			t.Errorf("%s %s: %d %q", tt.method, tt.path, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("DELETE", "/things/a", nil))
	if w.Code != 405 || w.Header().Get("Allow") != "GET, PATCH" || !strings.Contains(w.Body.String(), `"error":"method_not_allowed"`) {
		t.Errorf("DELETE: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if _, err := Mux(rows, Handlers{"GET /things/{id}": http.HandlerFunc(seen)}, MuxOptions{}); err == nil {
		t.Error("a row without a handler was accepted")
	}
	hs["POST /nowhere"] = http.HandlerFunc(seen)
	if _, err := Mux(rows, hs, MuxOptions{}); err == nil {
		t.Error("a handler without a row was accepted")
	}
}
