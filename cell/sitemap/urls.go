package sitemap

import (
	"net"
	"net/url"
	"path"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// resolve parses raw (trimmed, and without the tabs and newlines the URL
// standard strips) against base, or as an absolute URL when base is nil.
// It returns nil for anything but an http(s) URL with a host.
func resolve(base *url.URL, raw string) *url.URL {
	raw = strings.TrimSpace(raw)
	if strings.ContainsAny(raw, "\t\n\r") {
		raw = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(raw)
	}
	if raw == "" && base == nil {
		return nil
	}
	var u *url.URL
	var err error
	if base != nil {
		u, err = base.Parse(raw)
	} else {
		u, err = url.Parse(raw)
	}
	if err != nil {
		return nil
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return nil
	}
	return u
}

// normalize puts u in normal form (package doc).
func normalize(u *url.URL, dropQuery bool) {
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") { // IPv6
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if dropQuery {
		u.RawQuery, u.ForceQuery = "", false
	}
	if u.Path == "/" && u.RawPath == "" {
		u.Path = ""
	}
}

// looksLikePage says whether u may be an HTML page: its path does not end
// in the extension of a file type that never is.
func looksLikePage(u *url.URL) bool {
	switch strings.ToLower(path.Ext(u.Path)) {
	case ".pdf", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".bmp", ".avif",
		".css", ".js", ".mjs", ".json", ".xml", ".rss", ".txt", ".csv",
		".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".deb", ".rpm", ".dmg", ".exe", ".iso",
		".mp3", ".mp4", ".m4a", ".ogg", ".wav", ".webm", ".avi", ".mov", ".mkv",
		".woff", ".woff2", ".ttf", ".otf", ".eot",
		".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".epub":
		return false
	}
	return true
}

// scope decides which URLs belong to the site being mapped.
type scope struct {
	host   string // the start host without "www."
	port   string
	domain string // registrable domain of the start host; "" for IPs and single labels
	subs   bool   // any host under domain
	prefix string // path prefix; "" for any path
}

func newScope(start *url.URL, subs, anyPath bool) scope {
	u := *start
	normalize(&u, true)
	s := scope{host: stripWWW(u.Hostname()), port: u.Port(), subs: subs}
	if net.ParseIP(s.host) == nil {
		if d, err := publicsuffix.EffectiveTLDPlusOne(s.host); err == nil {
			s.domain = d
		}
	}
	if !anyPath && u.Path != "" && u.Path != "/" {
		s.prefix = u.Path
		if i := strings.LastIndexByte(u.Path, '/'); strings.Contains(u.Path[i+1:], ".") {
			s.prefix = u.Path[:i+1] // a file: its directory
		}
		if s.prefix == "/" {
			s.prefix = ""
		}
	}
	return s
}

func stripWWW(h string) string { return strings.TrimPrefix(h, "www.") }

// contains says whether the normalised URL u is in scope.
func (s scope) contains(u *url.URL) bool {
	if u.Port() != s.port {
		return false
	}
	h := stripWWW(u.Hostname())
	switch {
	case h == s.host:
	case s.subs && s.domain != "" && (h == s.domain || strings.HasSuffix(h, "."+s.domain)):
	default:
		return false
	}
	return s.prefix == "" || strings.HasPrefix(u.Path, s.prefix)
}

// subdomainLabels are the labels of host left of the registrable domain,
// without "www": the part of a host that may say what a page is about.
func subdomainLabels(host string) []string {
	host = strings.ToLower(host)
	if net.ParseIP(host) != nil {
		return nil
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil || d == host {
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(host, "."+d), ".") {
		if l != "www" && l != "" {
			out = append(out, l)
		}
	}
	return out
}
