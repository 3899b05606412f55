package urlpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		raw          string
		allowPrivate bool
		want         string // canonical URL when accepted
		err          error
	}{
		// Accepted, and canonicalised.
		{raw: "http://example.com", want: "http://example.com/"},
		{raw: "  https://example.com/a?b=c#d \n", want: "https://example.com/a?b=c#d"},
		{raw: "HTTP://Example.COM:80/Path", want: "http://example.com/Path"},
		{raw: "https://example.com:443/", want: "https://example.com/"},
		{raw: "http://example.com:443/", want: "http://example.com:443/"},
		{raw: "http://example.com:8080/", want: "http://example.com:8080/"},
		{raw: "http://example.com:08080/", want: "http://example.com:8080/"},
		{raw: "http://example.com:/", want: "http://example.com/"},
		{raw: "http://example.com./", want: "http://example.com./"},
		{raw: "http://sub_domain.example.com/", want: "http://sub_domain.example.com/"},
		{raw: "http://example.com?q=1", want: "http://example.com/?q=1"},
		{raw: "http://bücher.example/", want: "http://xn--bcher-kva.example/"},
		{raw: "http://8.8.8.8/", want: "http://8.8.8.8/"},
		{raw: "http://134744072/", want: "http://8.8.8.8/"},
		{raw: "http://0x8.0x8.0x8.0x8/", want: "http://8.8.8.8/"},
		{raw: "http://[2606:4700:4700::1111]/", want: "http://[2606:4700:4700::1111]/"},
		{raw: "http://[2606:4700:4700:0:0:0:0:1111]:8080/", want: "http://[2606:4700:4700::1111]:8080/"},
		{raw: "http://[::ffff:8.8.8.8]/", want: "http://[::ffff:8.8.8.8]/"},
		{raw: "http://[64:ff9b::808:808]/", want: "http://[64:ff9b::808:808]/"},
		{raw: "http://[2002:808:808::1]/", want: "http://[2002:808:808::1]/"},
		{raw: "http://public.test/", want: "http://public.test/"}, // names are judged when dialled

		// Scheme.
		{raw: "ftp://example.com/", err: ErrScheme},
		{raw: "file:///etc/passwd", err: ErrScheme},
		{raw: "javascript:alert(1)", err: ErrScheme},
		{raw: "gopher://127.0.0.1:6379/_FLUSHALL", err: ErrScheme},
		{raw: "example.com/page", err: ErrScheme},
		{raw: "//example.com/", err: ErrScheme},
		{raw: "httpx://example.com/", err: ErrScheme},

		// Malformed.
		{raw: "", err: ErrInvalidURL},
		{raw: "   ", err: ErrInvalidURL},
		{raw: "http://", err: ErrInvalidURL},
		{raw: "http:///path", err: ErrInvalidURL},
		{raw: "http:example.com", err: ErrInvalidURL},
		{raw: "http://exa mple.com/", err: ErrInvalidURL},
		{raw: "http://exa!mple.com/", err: ErrInvalidURL},
		{raw: "http://a..b/", err: ErrInvalidURL},
		{raw: "http://.example.com/", err: ErrInvalidURL},
		{raw: "http://" + strings.Repeat("a", 64) + ".com/", err: ErrInvalidURL},
		{raw: "http://%6c%6fcalhost/", err: ErrInvalidURL},
		{raw: "http://x\x00y/", err: ErrInvalidURL},
		{raw: "http://[::1/", err: ErrInvalidURL},
		{raw: "http://[v1.x]/", err: ErrInvalidURL},
		{raw: "http://[127.0.0.1]/", err: ErrInvalidURL},
		{raw: "http://1.2.3.4.5/", err: ErrInvalidURL},
		{raw: "http://256.0.0.1/", err: ErrInvalidURL},
		{raw: "http://4294967296/", err: ErrInvalidURL},
		{raw: "http://99999999999999999999999/", err: ErrInvalidURL},
		{raw: "http://0x1g.0.0.1/", err: ErrInvalidURL},
		{raw: "http://foo.09/", err: ErrInvalidURL},
		{raw: "http://" + strings.Repeat("a/", maxURLLen), err: ErrInvalidURL},
		// Credentials, and the tricks that hide a host behind them.
		{raw: "http://user:pass@example.com/", err: ErrInvalidURL},
		{raw: "http://@example.com/", err: ErrInvalidURL},
		{raw: "http://example.com@127.0.0.1/", err: ErrInvalidURL},
		{raw: "http://example.com:80@127.0.0.1/", err: ErrInvalidURL},
		{raw: "http://127.0.0.1%2f@example.com/", err: ErrInvalidURL},
		{raw: "http://example.com\\@127.0.0.1/", err: ErrInvalidURL},
		// Ports.
		{raw: "http://example.com:0/", err: ErrInvalidURL},
		{raw: "http://example.com:65536/", err: ErrInvalidURL},
		{raw: "http://example.com:99999999999/", err: ErrInvalidURL},
		{raw: "http://example.com:-1/", err: ErrInvalidURL},
		{raw: "http://example.com:0x50/", err: ErrInvalidURL},
		{raw: "http://example.com:25/", err: ErrInvalidURL},
		{raw: "http://example.com:6667/", err: ErrInvalidURL},
		{raw: "https://example.com:22/", err: ErrInvalidURL, allowPrivate: true},

		// Not public: every spelling of loopback and friends.
		{raw: "http://127.0.0.1/", err: ErrNotPublic},
		{raw: "http://127.0.0.1./", err: ErrNotPublic},
		{raw: "http://127.255.255.254:8080/", err: ErrNotPublic},
		{raw: "http://2130706433/", err: ErrNotPublic},
		{raw: "http://0x7f000001/", err: ErrNotPublic},
		{raw: "http://0X7F000001/", err: ErrNotPublic},
		{raw: "http://0177.0.0.1/", err: ErrNotPublic},
		{raw: "http://0177.0000.0000.0001/", err: ErrNotPublic},
		{raw: "http://0x7f.0x0.0x0.0x1/", err: ErrNotPublic},
		{raw: "http://0x7f.1/", err: ErrNotPublic},
		{raw: "http://127.1/", err: ErrNotPublic},
		{raw: "http://127.0.1/", err: ErrNotPublic},
		{raw: "http://017700000001/", err: ErrNotPublic},
		{raw: "http://0/", err: ErrNotPublic},
		{raw: "http://0.0.0.0/", err: ErrNotPublic},
		{raw: "http://0x/", err: ErrNotPublic},
		{raw: "http://[::1]/", err: ErrNotPublic},
		{raw: "http://[::]/", err: ErrNotPublic},
		{raw: "http://[0:0:0:0:0:0:0:1]/", err: ErrNotPublic},
		{raw: "http://[::ffff:127.0.0.1]/", err: ErrNotPublic},
		{raw: "http://[::ffff:7f00:1]/", err: ErrNotPublic},
		{raw: "http://[0:0:0:0:0:ffff:127.0.0.1]/", err: ErrNotPublic},
		{raw: "http://[::127.0.0.1]/", err: ErrNotPublic},
		{raw: "http://[64:ff9b::7f00:1]/", err: ErrNotPublic},
		{raw: "http://[64:ff9b::a9fe:a9fe]/", err: ErrNotPublic},
		{raw: "http://[2002:7f00:1::]/", err: ErrNotPublic},
		{raw: "http://[2002:c0a8:101::1]/", err: ErrNotPublic},
		{raw: "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", err: ErrNotPublic}, // Teredo, client 192.0.2.45
		{raw: "http://[fe80::1%25eth0]/", err: ErrNotPublic},
		{raw: "http://[2606:4700:4700::1111%25eth0]/", err: ErrNotPublic},
		{raw: "http://[fe80::1]/", err: ErrNotPublic},
		{raw: "http://[fc00::1]/", err: ErrNotPublic},
		{raw: "http://[fd12:3456:789a::1]/", err: ErrNotPublic},
		{raw: "http://[ff02::1]/", err: ErrNotPublic},
		{raw: "http://[2001:db8::1]/", err: ErrNotPublic},
		{raw: "http://10.0.0.1/", err: ErrNotPublic},
		{raw: "http://172.16.0.1/", err: ErrNotPublic},
		{raw: "http://172.31.255.255/", err: ErrNotPublic},
		{raw: "http://192.168.1.1/", err: ErrNotPublic},
		{raw: "http://169.254.169.254/latest/meta-data/", err: ErrNotPublic},
		{raw: "http://0xa9fea9fe/", err: ErrNotPublic},
		{raw: "http://100.64.0.1/", err: ErrNotPublic},
		{raw: "http://192.0.0.170/", err: ErrNotPublic},
		{raw: "http://192.0.2.1/", err: ErrNotPublic},
		{raw: "http://198.18.0.1/", err: ErrNotPublic},
		{raw: "http://198.51.100.1/", err: ErrNotPublic},
		{raw: "http://203.0.113.1/", err: ErrNotPublic},
		{raw: "http://224.0.0.1/", err: ErrNotPublic},
		{raw: "http://240.0.0.1/", err: ErrNotPublic},
		{raw: "http://255.255.255.255/", err: ErrNotPublic},
		{raw: "http://localhost/", err: ErrNotPublic},
		{raw: "http://LOCALHOST:8080/", err: ErrNotPublic},
		{raw: "http://localhost./", err: ErrNotPublic},
		{raw: "http://app.localhost/", err: ErrNotPublic},
		{raw: "http://a.b.localhost./", err: ErrNotPublic},
		{raw: "http://localhost.localdomain/", err: ErrNotPublic},
		{raw: "http://ip6-localhost/", err: ErrNotPublic},
		{raw: "http://ｌｏｃａｌｈｏｓｔ/", err: ErrNotPublic}, // full-width, folded by IDNA
		{raw: "http://１２７．０．０．１/", err: ErrNotPublic}, // full-width digits and dots
		{raw: "http://printer.local/", err: ErrNotPublic},
		{raw: "http://metadata.google.internal/", err: ErrNotPublic},
		{raw: "http://router.home.arpa/", err: ErrNotPublic},
		{raw: "http://intranet/", err: ErrNotPublic},
		{raw: "http://metadata/", err: ErrNotPublic},

		// allowPrivate lets the same hosts through, canonicalised.
		{raw: "http://127.0.0.1:8080/", allowPrivate: true, want: "http://127.0.0.1:8080/"},
		{raw: "http://2130706433/", allowPrivate: true, want: "http://127.0.0.1/"},
		{raw: "http://0x7f000001/", allowPrivate: true, want: "http://127.0.0.1/"},
		{raw: "http://0177.0.0.1/", allowPrivate: true, want: "http://127.0.0.1/"},
		{raw: "http://127.1/", allowPrivate: true, want: "http://127.0.0.1/"},
		{raw: "http://0/", allowPrivate: true, want: "http://0.0.0.0/"},
		{raw: "http://[::1]:8080/", allowPrivate: true, want: "http://[::1]:8080/"},
		{raw: "http://[fe80::1%25eth0]/", allowPrivate: true, want: "http://[fe80::1%25eth0]/"},
		{raw: "http://localhost:8080/", allowPrivate: true, want: "http://localhost:8080/"},
		{raw: "http://intranet/", allowPrivate: true, want: "http://intranet/"},
		{raw: "http://user@localhost/", allowPrivate: true, err: ErrInvalidURL},
	}
	for _, tt := range tests {
		u, err := Validate(tt.raw, tt.allowPrivate)
		if tt.err != nil {
			if !isOnly(err, tt.err) {
				t.Errorf("Validate(%q, %v) = %v, %v; want error %v", tt.raw, tt.allowPrivate, u, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Validate(%q, %v): %v", tt.raw, tt.allowPrivate, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("Validate(%q, %v) = %q; want %q", tt.raw, tt.allowPrivate, got, tt.want)
		}
	}
}

func TestIsPublic(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.215.14", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"172.15.255.255", true},
		{"172.32.0.0", true},
		{"192.0.1.1", true},
		{"198.17.255.255", true},
		{"198.20.0.0", true},
		{"223.255.255.255", true},
		{"2606:4700:4700::1111", true},
		{"2a00:1450:4001:80e::200e", true},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::808:808", true},
		{"2002:808:808::1", true},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", true}, // Teredo, client 8.8.8.8

		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.255.255.255", false},
		{"100.64.0.0", false},
		{"100.127.255.255", false},
		{"127.0.0.1", false},
		{"127.0.0.2", false},
		{"169.254.169.254", false},
		{"172.16.0.0", false},
		{"172.31.255.255", false},
		{"192.0.0.8", false},
		{"192.0.2.255", false},
		{"192.88.99.1", false},
		{"192.168.0.1", false},
		{"198.18.0.0", false},
		{"198.19.255.255", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"224.0.0.251", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"::", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::127.0.0.1", false},
		{"::8.8.8.8", false}, // deprecated IPv4-compatible: never routed
		{"64:ff9b::127.0.0.1", false},
		{"64:ff9b::10.0.0.1", false},
		{"64:ff9b:1::808:808", false}, // local-use NAT64
		{"100::1", false},
		{"2001:db8::1", false},
		{"3fff::1", false},
		{"2001:2::1", false},  // benchmarking
		{"2001:10::1", false}, // ORCHID
		{"2002:7f00:1::1", false},
		{"2002:a00:1::1", false},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", false}, // Teredo, client 127.0.0.1
		{"2001:0:7f00:1:8000:63bf:f7f7:f7f7", false},    // Teredo, server 127.0.0.1
		{"fc00::1", false},
		{"fdff:ffff::1", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"febf::1", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		{"5f00::1", false},
	}
	for _, tt := range tests {
		if got := isPublic(netip.MustParseAddr(tt.addr)); got != tt.public {
			t.Errorf("isPublic(%s) = %v; want %v", tt.addr, got, tt.public)
		}
	}
	if isPublic(netip.Addr{}) {
		t.Error("isPublic(zero Addr) = true")
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "https://example.com:8443/a?b#c", "http://127.0.0.1/",
		"http://2130706433/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/",
		"http://[fe80::1%25eth0]/", "http://bücher.example/", "http://a@b/",
		"http://example.com:65536/", "ftp://x/", "http:x", "http://1.2.3.4.5/",
		"http://ｌｏｃａｌｈｏｓｔ/", "http://x.localhost./",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, allowPrivate := range []bool{false, true} {
			u, err := Validate(raw, allowPrivate)
			if err != nil {
				if u != nil {
					t.Fatalf("Validate(%q, %v) returned a URL with error %v", raw, allowPrivate, err)
				}
				if !errors.Is(err, ErrInvalidURL) && !errors.Is(err, ErrScheme) && !errors.Is(err, ErrNotPublic) {
					t.Fatalf("Validate(%q, %v): error %v is none of the sentinels", raw, allowPrivate, err)
				}
				if allowPrivate && errors.Is(err, ErrNotPublic) {
					t.Fatalf("Validate(%q, true) = %v", raw, err)
				}
				continue
			}
			if u.Scheme != "http" && u.Scheme != "https" {
				t.Fatalf("Validate(%q, %v) accepted scheme %q", raw, allowPrivate, u.Scheme)
			}
			if u.Hostname() == "" || u.User != nil || u.Opaque != "" {
				t.Fatalf("Validate(%q, %v) accepted %#v", raw, allowPrivate, u)
			}
			if !allowPrivate {
				if a, err := netip.ParseAddr(u.Hostname()); err == nil && !isPublic(a) {
					t.Fatalf("Validate(%q, false) accepted non-public %s", raw, a)
				}
				if _, ok := parseIPv4(u.Hostname()); ok && endsInNumber(u.Hostname()) {
					if a, _ := parseIPv4(u.Hostname()); !isPublic(a) {
						t.Fatalf("Validate(%q, false) accepted non-public %s", raw, a)
					}
				}
				// What is accepted without private networks is accepted,
				// identically, with them.
				if v, err := Validate(raw, true); err != nil || v.String() != u.String() {
					t.Fatalf("Validate(%q): %v with private networks, %v without", raw, err, u)
				}
			}
			// The canonical form is a fixed point.
			s := u.String()
			v, err := Validate(s, allowPrivate)
			if err != nil {
				t.Fatalf("Validate(%q, %v) = %q, which is refused: %v", raw, allowPrivate, s, err)
			}
			if v.String() != s {
				t.Fatalf("Validate(%q, %v) = %q, not canonical: again gives %q", raw, allowPrivate, s, v)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	for _, bm := range []struct{ name, url string }{
		{"name", "https://www.example.com/products/list?page=2&sort=price#top"},
		{"idn", "https://bücher.example/katalog"},
		{"ipv4-hex", "http://0x7f000001/"},
		{"ipv6", "http://[2606:4700:4700::1111]:8080/"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Validate(bm.url, false)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example/p?token=s3cret#frag":   "https://a.example/p",
		"https://user:pw@a.example/p?x=1":         "https://a.example/p",
		"http://a.example/":                       "http://a.example/",
		"http://u:p@a example/%zz?t=1":            "http://a example/%zz",
		"https://a.example/search?q=private+term": "https://a.example/search",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// isOnly reports whether err is sentinel and none of the policy's other
// errors.
func isOnly(err, sentinel error) bool {
	if !errors.Is(err, sentinel) {
		return false
	}
	for _, other := range []error{ErrInvalidURL, ErrScheme, ErrNotPublic} {
		if other != sentinel && errors.Is(err, other) {
			return false
		}
	}
	return true
}
