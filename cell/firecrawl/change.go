package firecrawl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
)

// Firecrawl's changeTracking format (docs/firecrawl.md, "Change
// tracking"): a page's Markdown compared with the one the same account
// got the last time it scraped that URL with change tracking and the
// same tag. The cell keeps that last snapshot (cell/v2_change.go); this
// file decides the status and writes the diff.

// Change statuses.
const (
	ChangeNew     = "new"
	ChangeSame    = "same"
	ChangeChanged = "changed"
	ChangeRemoved = "removed"
)

// MaxTrackTag bounds a changeTracking tag.
const MaxTrackTag = 128

// maxSnapshot bounds the Markdown a snapshot keeps; a longer page is
// compared by its hash, and its diff covers the first maxSnapshot bytes.
const maxSnapshot = 1 << 20

func checkTrack(f Format, name string) error {
	for i, m := range f.Modes {
		switch m {
		case "git-diff":
		case "json":
			return Unsupported(fmt.Sprintf("%s.modes.%d", name, i), "the json mode of change tracking is not supported; the git-diff mode and the change status are")
		default:
			return BadRequest(fmt.Sprintf("%s.modes.%d", name, i), fmt.Sprintf("unknown change tracking mode %q (git-diff or json)", m))
		}
	}
	if len(f.Tag) > MaxTrackTag {
		return BadRequest(name+".tag", fmt.Sprintf("tag is at most %d bytes", MaxTrackTag))
	}
	return nil
}

// Snapshot is what is kept of a page between two change-tracked scrapes.
type Snapshot struct {
	At       time.Time `json:"at"`
	Hash     string    `json:"hash"`
	Markdown string    `json:"markdown"`
	// Gone: the last scrape found the page missing (a 404 or 410).
	Gone bool `json:"gone,omitempty"`
}

// ChangeTracking is a document's changeTracking.
type ChangeTracking struct {
	PreviousScrapeAt *string    `json:"previousScrapeAt"`
	ChangeStatus     string     `json:"changeStatus"`
	Visibility       string     `json:"visibility"`
	Diff             *TrackDiff `json:"diff,omitempty"`
}

// TrackDiff is the git-diff mode's answer: the unified diff as text, and
// parsed as parse-diff parses it (Firecrawl's diff.json).
type TrackDiff struct {
	Text string   `json:"text"`
	JSON DiffJSON `json:"json"`
}

// DiffJSON is a parsed unified diff of one file.
type DiffJSON struct {
	Files []DiffFile `json:"files"`
}

type DiffFile struct {
	From      string      `json:"from"`
	To        string      `json:"to"`
	Chunks    []DiffChunk `json:"chunks"`
	Additions int         `json:"additions"`
	Deletions int         `json:"deletions"`
}

type DiffChunk struct {
	Content  string       `json:"content"`
	Changes  []DiffChange `json:"changes"`
	OldStart int          `json:"oldStart"`
	OldLines int          `json:"oldLines"`
	NewStart int          `json:"newStart"`
	NewLines int          `json:"newLines"`
}

// DiffChange is one line of a chunk: add (ln: its line in the new page),
// del (ln: in the old) or normal (ln1 old, ln2 new).
type DiffChange struct {
	Type    string `json:"type"`
	Normal  bool   `json:"normal,omitempty"`
	Add     bool   `json:"add,omitempty"`
	Del     bool   `json:"del,omitempty"`
	Ln      int    `json:"ln,omitempty"`
	Ln1     int    `json:"ln1,omitempty"`
	Ln2     int    `json:"ln2,omitempty"`
	Content string `json:"content"`
}

// Track compares a page now (its Markdown; missing: a 404 or 410) with
// prev (nil: never tracked) and returns the document's changeTracking and
// the snapshot to keep.
func Track(f *Format, prev *Snapshot, markdown string, missing bool, now time.Time) (*ChangeTracking, Snapshot) {
	sum := sha256.Sum256([]byte(markdown))
	next := Snapshot{At: now.UTC(), Hash: hex.EncodeToString(sum[:]), Markdown: clipUTF8(markdown, maxSnapshot), Gone: missing}
	ct := &ChangeTracking{Visibility: "visible"}
	switch {
	case prev == nil || prev.Gone && !missing:
		ct.ChangeStatus = ChangeNew
	case missing && !prev.Gone:
		ct.ChangeStatus = ChangeRemoved
	case prev.Hash == next.Hash || missing:
		ct.ChangeStatus = ChangeSame
	default:
		ct.ChangeStatus = ChangeChanged
	}
	if prev != nil {
		at := prev.At.UTC().Format(time.RFC3339Nano)
		ct.PreviousScrapeAt = &at
	}
	if wantsDiff(f) && prev != nil {
		ct.Diff = diff(prev.Markdown, next.Markdown)
	}
	return ct, next
}

func wantsDiff(f *Format) bool {
	for _, m := range f.Modes {
		if m == "git-diff" {
			return true
		}
	}
	return false
}

// diff is the unified diff of the two Markdown texts, as text and parsed.
func diff(old, new string) *TrackDiff {
	edits := udiff.Lines(old, new)
	u, err := udiff.ToUnifiedDiff("previous", "current", old, edits, udiff.DefaultContextLines)
	if err != nil {
		return &TrackDiff{JSON: DiffJSON{Files: []DiffFile{}}}
	}
	text := u.String()
	file := DiffFile{From: "previous", To: "current", Chunks: []DiffChunk{}}
	for _, h := range u.Hunks {
		c := DiffChunk{OldStart: h.FromLine, NewStart: h.ToLine, Changes: []DiffChange{}}
		ln1, ln2 := h.FromLine, h.ToLine
		for _, l := range h.Lines {
			content := strings.TrimSuffix(l.Content, "\n")
			switch l.Kind {
			case udiff.Delete:
				c.Changes = append(c.Changes, DiffChange{Type: "del", Del: true, Ln: ln1, Content: "-" + content})
				ln1++
				c.OldLines++
				file.Deletions++
			case udiff.Insert:
				c.Changes = append(c.Changes, DiffChange{Type: "add", Add: true, Ln: ln2, Content: "+" + content})
				ln2++
				c.NewLines++
				file.Additions++
			default:
				c.Changes = append(c.Changes, DiffChange{Type: "normal", Normal: true, Ln1: ln1, Ln2: ln2, Content: " " + content})
				ln1++
				ln2++
				c.OldLines++
				c.NewLines++
			}
		}
		c.Content = fmt.Sprintf("@@ -%d,%d +%d,%d @@", c.OldStart, c.OldLines, c.NewStart, c.NewLines)
		file.Chunks = append(file.Chunks, c)
	}
	files := []DiffFile{}
	if len(file.Chunks) > 0 {
		files = append(files, file)
	}
	return &TrackDiff{Text: text, JSON: DiffJSON{Files: files}}
}

// clipUTF8 is s cut to at most n bytes at a character boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
