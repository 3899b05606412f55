package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) batchCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "batch FILE",
		Short: "scrape a file of URLs now, 50 a request, NDJSON lines as they finish",
		Long: `batch scrapes the URLs of FILE (one a line, "-": stdin) with POST /scrape/batch,
50 a request, and writes each URL's line as it finishes: NDJSON when piped, a
table on a terminal. Each line is charged as it arrives; Ctrl-C stops, and the
URLs without a line were not charged. For thousands of URLs, or work that
outlives the terminal, use "trawl job submit".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			urls, err := a.readURLs(args[0])
			if err != nil {
				return err
			}
			return a.batch(cmd.Context(), urls, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "md, html or both")
	return cmd
}

// batchSize is the spec's limit of one batch request (§8).
const batchSize = 50

func (a *app) batch(ctx context.Context, urls []string, format string) error {
	if err := a.connect(); err != nil {
		return err
	}
	pr := a.newProgress("batch")
	c := counts{Total: len(urls), Pending: len(urls)}
	var credits float64
	pr.update(c)
	human := a.human()
	// People's lines go above the bar when there is one (mpb prints them
	// between its redraws), else straight to stdout.
	rows := a.stdout
	if pr.p != nil && isTerminal(a.stdout) {
		rows = pr.p
	}
	for i := 0; i < len(urls); i += batchSize {
		chunk := urls[i:min(i+batchSize, len(urls))]
		resp, err := a.c.Open(ctx, "POST", "/scrape/batch", map[string]any{"urls": chunk, "format": format}, nil)
		if err != nil {
			pr.summary("")
			return err
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		var stop error
		for sc.Scan() {
			line := sc.Bytes()
			var l struct {
				URL, Error, Message string
				OK                  bool
				Usage               struct{ Units string }
				Result              struct {
					Status int
					Title  string
				}
				Status  int
				Actions map[string]string
			}
			if json.Unmarshal(line, &l) != nil {
				continue
			}
			if l.URL == "" && l.Error != "" {
				// The stream's own end: a 402 body, or the cell gone.
				stop = errorLine(line, l.Error)
				break
			}
			if u, err := strconv.ParseFloat(l.Usage.Units, 64); err == nil {
				credits += u
			}
			c.Pending--
			if l.OK {
				c.Done++
			} else {
				c.Error++
			}
			c.Credits = fmt.Sprintf("%.3f", credits)
			pr.update(c)
			if human {
				if l.OK {
					fmt.Fprintf(rows, "ok    %3d  %s  %s\n", l.Result.Status, l.URL, clip(l.Result.Title, 60))
				} else {
					fmt.Fprintf(rows, "FAIL       %s  %s: %s\n", l.URL, l.Error, clip(l.Message, 80))
				}
			} else {
				a.stdout.Write(append(append([]byte(nil), line...), '\n'))
			}
		}
		err = sc.Err()
		resp.Body.Close()
		if ctx.Err() != nil {
			pr.summary(fmt.Sprintf("interrupted: the %d URLs without a line were not charged", c.Pending))
			return &exitError{code: ExitInterrupted}
		}
		if stop != nil {
			pr.summary("")
			return stop
		}
		if err != nil {
			pr.summary("")
			return err
		}
	}
	pr.summary("")
	if c.Error > 0 {
		return &exitError{code: ExitPartial, msg: fmt.Sprintf("%d of %d URLs failed", c.Error, c.Total)}
	}
	return nil
}

// errorLine is a stream's last line that is an error body, as the error
// the gate would have answered.
func errorLine(line []byte, code string) error {
	status := 502
	switch code {
	case "no_credit", "spend_cap":
		status = 402
	}
	return errorOf(status, line)
}
