package clientip

import (
	"net/http/httptest"
	"testing"
)

func TestBucket(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":               "203.0.113.7",
		"::ffff:203.0.113.7":        "203.0.113.7",
		"2001:db8:1:2:aaaa::1":      "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff::9": "2001:db8:1:2::/64",
		"fe80::1%eth0":              "fe80::/64",
		"not an address":            "not an address",
	} {
		if got := Bucket(in); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", in, got, want)
		}
	}
	if Bucket("2001:db8:1:2::1") == Bucket("2001:db8:1:3::1") {
		t.Error("two /64s share a bucket")
	}
}

func TestOf(t *testing.T) {
	r := httptest.NewRequest("POST", "/signup", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	if got := Of(r); got != "127.0.0.1" {
		t.Errorf("connection address: %q", got)
	}
	r = r.WithContext(With(r.Context(), "198.51.100.4"))
	if got := Of(r); got != "198.51.100.4" {
		t.Errorf("address from the gate: %q", got)
	}
}
