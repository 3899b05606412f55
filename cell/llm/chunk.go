package llm

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Chunk cuts Markdown into chunks of at most size bytes, at paragraph
// breaks where it can, else at line breaks, else inside a line (never
// inside a UTF-8 sequence). It returns at most maxChunks chunks: the rest
// of a longer page is not sent.
func Chunk(md string, size, maxChunks int) []string {
	md = strings.TrimSpace(md)
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			chunks = append(chunks, s)
		}
		cur.Reset()
	}
	add := func(piece, sep string) {
		if cur.Len() > 0 && cur.Len()+len(sep)+len(piece) > size {
			flush()
		}
		if cur.Len() > 0 {
			cur.WriteString(sep)
		}
		cur.WriteString(piece)
	}
	for para := range strings.SplitSeq(md, "\n\n") {
		if len(para) <= size {
			add(para, "\n\n")
			continue
		}
		for line := range strings.SplitSeq(para, "\n") {
			for len(line) > size {
				cut := size
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				if sp := strings.LastIndexAny(line[:cut], " \t"); sp > size/2 {
					cut = sp
				}
				add(line[:cut], "\n")
				flush()
				line = line[cut:]
			}
			add(line, "\n")
		}
		if len(chunks) >= maxChunks {
			break
		}
	}
	flush()
	if len(chunks) > maxChunks {
		chunks = chunks[:maxChunks]
	}
	return chunks
}

// BytesPerToken is the estimate of tokens this package uses: a token of
// the common BPE vocabularies is about four bytes of English text (fewer
// for other scripts, so the estimate errs towards smaller chunks there
// only in bytes, never in tokens). No tokenizer is shipped: the model's
// own count comes back in its usage, and that is what is billed.
const BytesPerToken = 4

// EstimateTokens is the token estimate of s (BytesPerToken).
func EstimateTokens(s string) int { return (len(s) + BytesPerToken - 1) / BytesPerToken }

// ChunkTokens cuts Markdown into at most maxChunks chunks of about size
// tokens (EstimateTokens) as Chunk does, and begins every chunk after the
// first with the last overlap tokens of the one before it (from a line
// start when one is near), so a record cut at a chunk's end is whole in
// the next. An overlap of size/2 or more is taken as size/4.
func ChunkTokens(md string, size, overlap, maxChunks int) []string {
	if size <= 0 {
		size = 1
	}
	if overlap < 0 || overlap >= size/2 {
		overlap = size / 4
	}
	body := (size - overlap) * BytesPerToken
	chunks := Chunk(md, body, maxChunks)
	if overlap == 0 || len(chunks) < 2 {
		return chunks
	}
	out := make([]string, len(chunks))
	out[0] = chunks[0]
	for i := 1; i < len(chunks); i++ {
		out[i] = tail(chunks[i-1], overlap*BytesPerToken) + "\n\n" + chunks[i]
	}
	return out
}

// tail is the last n bytes of s or a little less, starting at a line
// start when there is one in its first half, else at a rune start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	if nl := strings.IndexByte(s[start:], '\n'); nl >= 0 && nl < n/2 {
		return s[start+nl+1:]
	}
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// WritePage writes the page part of a prompt: the page's URL when known,
// then chunk i of n of its Markdown, with note after the part count when
// the page is in several parts ("fill what this part shows").
func WritePage(w io.Writer, pageURL, chunk string, i, n int, note string) {
	if pageURL != "" {
		fmt.Fprintf(w, "Page URL: %s\n", pageURL)
	}
	switch {
	case n > 1 && note != "":
		fmt.Fprintf(w, "Page content (Markdown, part %d of %d; %s):\n\n%s", i+1, n, note, chunk)
	case n > 1:
		fmt.Fprintf(w, "Page content (Markdown, part %d of %d):\n\n%s", i+1, n, chunk)
	default:
		fmt.Fprintf(w, "Page content (Markdown):\n\n%s", chunk)
	}
}
