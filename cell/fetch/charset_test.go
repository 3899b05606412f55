package fetch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeText(t *testing.T) {
	longHead := "<!DOCTYPE html><html><head><!-- " + strings.Repeat("x", prescanLen) + " -->"
	tests := []struct {
		name        string
		body        string
		contentType string
		want        string
		wantType    string
		wantCharset string
	}{
		{name: "meta charset", body: `<meta charset="windows-1252"><p>caf` + "\xe9", contentType: "text/html",
			want: `<meta charset="windows-1252"><p>café`, wantType: "text/html", wantCharset: "windows-1252"},
		{name: "meta charset unquoted, upper case", body: "<META CHARSET=SHIFT_JIS><p>\x93\xfa\x96\x7b", contentType: "text/html",
			want: "<META CHARSET=SHIFT_JIS><p>日本", wantType: "text/html", wantCharset: "shift_jis"},
		{name: "http-equiv", body: `<meta http-equiv="content-type" content="text/html; charset=koi8-r"><p>` + "\xf0\xd2\xc9", contentType: "text/html",
			want: `<meta http-equiv="content-type" content="text/html; charset=koi8-r"><p>При`, wantType: "text/html", wantCharset: "koi8-r"},
		{name: "content without http-equiv is no declaration; detection reads it", body: `<meta content="text/html; charset=koi8-r"><p>` + "\xf0\xd2\xc9", contentType: "text/html",
			want: `<meta content="text/html; charset=koi8-r"><p>При`, wantType: "text/html", wantCharset: "koi8-r"},
		{name: "meta after the prescan window is ignored", body: longHead + `<meta charset="koi8-r"></head><p>ok`, contentType: "text/html",
			want: longHead + `<meta charset="koi8-r"></head><p>ok`, wantType: "text/html", wantCharset: "utf-8"},
		{name: "unknown header label falls back to meta", body: `<meta charset="iso-8859-2"><p>` + "\xb1", contentType: "text/html; charset=bogus",
			want: `<meta charset="iso-8859-2"><p>ą`, wantType: "text/html", wantCharset: "iso-8859-2"},
		{name: "meta utf-16 means utf-8", body: `<meta charset="utf-16"><p>é`, contentType: "text/html",
			want: `<meta charset="utf-16"><p>é`, wantType: "text/html", wantCharset: "utf-8"},
		{name: "utf-16be bom", body: "\xfe\xff\x00h\x00i\x26\x03", contentType: "text/plain",
			want: "hi☃", wantType: "text/plain", wantCharset: "utf-16be"},
		{name: "declared utf-8 but invalid", body: "<p>ok \xff\xfe bad", contentType: "text/html; charset=utf-8",
			want: "<p>ok \ufffd bad", wantType: "text/html", wantCharset: "utf-8"},
		{name: "declared latin-1, valid utf-8: utf-8", body: "<p>Zürich, naïve", contentType: "text/html; charset=iso-8859-1",
			want: "<p>Zürich, naïve", wantType: "text/html", wantCharset: "utf-8"},
		{name: "declared utf-8, all invalid: detected", body: "<p>Le caf\xe9 de la r\xe9publique, o\xf9 l'on d\xeene", contentType: "text/html; charset=utf-8",
			want: "<p>Le café de la république, où l'on dîne", wantType: "text/html", wantCharset: "windows-1252"},
		{name: "ascii only", body: "<p>plain", contentType: "text/html",
			want: "<p>plain", wantType: "text/html", wantCharset: "utf-8"},
		{name: "xml declaration", body: `<?xml version="1.0" encoding='windows-1251'?><a>` + "\xcf\xf0\xe8", contentType: "application/rss+xml",
			want: `<?xml version="1.0" encoding='windows-1251'?><a>При`, wantType: "application/rss+xml", wantCharset: "windows-1251"},
		{name: "xml header beats declaration", body: `<?xml version="1.0" encoding="utf-8"?><a>` + "\xe9", contentType: "text/xml; charset=iso-8859-1",
			want: `<?xml version="1.0" encoding="utf-8"?><a>é`, wantType: "text/xml", wantCharset: "windows-1252"},
		{name: "meta is not read in plain text", body: `<meta charset="koi8-r">é`, contentType: "text/plain",
			want: `<meta charset="koi8-r">é`, wantType: "text/plain", wantCharset: "utf-8"},
		{name: "json", body: `{"a":"é"}`, contentType: "application/json",
			want: `{"a":"é"}`, wantType: "application/json", wantCharset: "utf-8"},
		{name: "sniffed html", body: "<!DOCTYPE html><p>\xe9", contentType: "",
			want: "<!DOCTYPE html><p>é", wantType: "text/html", wantCharset: "windows-1252"},
		{name: "unparseable content-type is sniffed", body: "<html><p>x", contentType: "html",
			want: "<html><p>x", wantType: "text/html", wantCharset: "utf-8"},
		{name: "media type parameters and case", body: "x", contentType: `Text/Plain ; format=flowed; charset="UTF-8"`,
			want: "x", wantType: "text/plain", wantCharset: "utf-8"},
		{name: "binary untouched", body: "\xff\xd8\xff\xe0", contentType: "image/jpeg",
			want: "\xff\xd8\xff\xe0", wantType: "image/jpeg", wantCharset: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, mt, cs := decodeText([]byte(tt.body), tt.contentType)
			if string(got) != tt.want || mt != tt.wantType || cs != tt.wantCharset {
				t.Errorf("decodeText = %q, %q, %q; want %q, %q, %q", got, mt, cs, tt.want, tt.wantType, tt.wantCharset)
			}
			if cs != "" && !utf8.Valid(got) {
				t.Errorf("decoded text is not valid UTF-8: %q", got)
			}
		})
	}
}
