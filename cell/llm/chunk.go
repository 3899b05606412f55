package llm

import (
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
