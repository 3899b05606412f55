package detect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPage(t *testing.T) {
	for _, tc := range []struct {
		file   string
		status int
		ctype  string
		want   Verdict
		reason string // a substring of Result.Reason
	}{
		// Content, whatever its status.
		{"article.html", 200, "text/html", Content, ""},
		{"article_about_walls.html", 200, "text/html", Content, ""},
		{"contact_form_recaptcha.html", 200, "text/html", Content, ""},
		{"ssr_with_noscript.html", 200, "text/html", Content, ""},
		{"tiny_static.html", 200, "text/html", Content, ""},
		{"japanese_article.html", 200, "text/html", Content, ""},
		{"not_found.html", 404, "text/html", Content, ""},
		{"nginx_403.html", 403, "text/html", Content, ""},
		{"article.html", 503, "text/html", Content, ""},
		{"react_shell.html", 404, "text/html", Content, ""}, // a shell only counts on success
		{"react_shell.html", 200, "text/plain", Content, ""},
		{"react_shell.html", 200, "application/json", Content, ""},

		// JavaScript shells.
		{"react_shell.html", 200, "text/html; charset=utf-8", Shell, "empty app root #root"},
		{"react_shell.html", 200, "", Shell, "empty app root #root"}, // sniffed
		{"vue_shell.html", 200, "text/html", Shell, "empty app root #app"},
		{"angular_shell.html", 200, "text/html", Shell, "empty app root <app-root>"},
		{"noscript_shell.html", 200, "text/html", Shell, "noscript asks for JavaScript"},
		{"script_only.html", 200, "text/html", Shell, "no text without scripts"},

		// Bot walls.
		{"cloudflare_just_a_moment.html", 503, "text/html", Blocked, "cloudflare challenge"},
		{"cloudflare_just_a_moment.html", 403, "text/html", Blocked, "cloudflare challenge"},
		{"cloudflare_just_a_moment.html", 200, "text/html", Blocked, "cloudflare challenge"},
		{"cloudflare_attention_required.html", 403, "text/html", Blocked, "cloudflare block"},
		{"recaptcha_wall.html", 200, "text/html", Blocked, "captcha (g-recaptcha)"},
		{"recaptcha_wall.html", 429, "text/html", Blocked, "captcha (g-recaptcha)"},
		{"hcaptcha_wall.html", 403, "text/html", Blocked, "captcha (h-captcha)"},
		{"turnstile_wall.html", 200, "text/html", Blocked, "captcha (cf-turnstile)"},
		{"akamai_access_denied.html", 403, "text/html", Blocked, "akamai"},
		{"datadome_wall.html", 403, "text/html", Blocked, "datadome"},
		{"perimeterx_wall.html", 403, "text/html", Blocked, "perimeterx"},
		{"incapsula_wall.html", 200, "text/html", Blocked, "imperva incapsula"},
		{"sucuri_wall.html", 403, "text/html", Blocked, "sucuri firewall"},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := Page(tc.status, tc.ctype, body)
		if got.Verdict != tc.want || !strings.Contains(got.Reason, tc.reason) {
			t.Errorf("%s (%d, %q): %v %q (%d words), want %v %q", tc.file, tc.status, tc.ctype, got.Verdict, got.Reason, got.Words, tc.want, tc.reason)
		}
		if tc.want == Content && got.Reason != "" {
			t.Errorf("%s: content with reason %q", tc.file, got.Reason)
		}
	}
}

func TestPageInline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   Verdict
	}{
		{"empty body", 200, "", Content},
		{"no markup", 200, "hello", Content},
		{"self-closing root", 200, `<html><head><script src=a.js></script></head><body><div id="root"/></body></html>`, Shell},
		{"root with content", 200, `<html><body><div id="root"><h1>Teas</h1><p>` + strings.Repeat("word ", 30) + `</p></div><script src=a.js></script></body></html>`, Content},
		{"unclosed noscript", 200, `<html><body><noscript>Please enable JavaScript`, Shell},
		{"access denied 200", 200, `<html><head><title>Access Denied</title></head><body>Denied.</body></html>`, Blocked},
		{"security check needs a status", 200, `<html><head><title>Security check</title></head><body>Our security checklist for small shops.</body></html>`, Content},
		{"security check 403", 403, `<html><head><title>Security check</title></head><body>Please wait.</body></html>`, Blocked},
		{"phrase on 429", 429, `<html><body><p>We detected unusual traffic from your network.</p></body></html>`, Blocked},
		{"phrase on 200", 200, `<html><body><p>We detected unusual traffic from your network.</p></body></html>`, Content},
		{"marker in a big page", 200, `<html><body><script src="/cdn-cgi/challenge-platform/x.js"></script><p>` + strings.Repeat("tea ", 400) + `</p></body></html>`, Content},
		{"marker in a big 403", 403, `<html><body><script src="/cdn-cgi/challenge-platform/x.js"></script><p>` + strings.Repeat("tea ", 400) + `</p></body></html>`, Blocked},
		{"svg text is not text", 200, `<html><head><script src=a.js></script></head><body><svg><text>` + strings.Repeat("x ", 50) + `</text></svg></body></html>`, Shell},
	} {
		got := Page(tc.status, "text/html", []byte(tc.body))
		if got.Verdict != tc.want {
			t.Errorf("%s: %v %q (%d words), want %v", tc.name, got.Verdict, got.Reason, got.Words, tc.want)
		}
	}
}

func TestCountWords(t *testing.T) {
	for in, want := range map[string]int{
		"":                   0,
		"  one two\tthree\n": 3,
		"緑茶の淹れ方":             6,
		"tea 緑茶 time":        4,
	} {
		if got := countWords([]byte(in)); got != want {
			t.Errorf("countWords(%q) = %d, want %d", in, got, want)
		}
	}
}

func BenchmarkPage(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "article_about_walls.html"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Page(200, "text/html", body)
	}
}

// FuzzPage feeds hostile markup to the classifier: it must not panic, and
// its verdict must be one of the three.
func FuzzPage(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.html"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(200, b)
		f.Add(403, b)
	}
	f.Add(200, []byte(`<div id="root"><div id="app"></div></div><app-root><noscript>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r := Page(status, "text/html", body)
		if r.Verdict > Blocked || r.Words < 0 || r.Words > smallPage {
			t.Fatalf("%+v", r)
		}
	})
}
