package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// table writes aligned columns on stdout.
func (a *app) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// clip shortens s to n runes for a table cell, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var boldTags = regexp.MustCompile(`</?b>`)

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// readURLs reads a file of URLs ("-": stdin), one a line; blank lines and
// # comments are skipped.
func (a *app) readURLs(path string) ([]string, error) {
	var r io.Reader
	if path == "-" {
		r = a.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageError{err}
		}
		defer f.Close()
		r = f
	}
	var urls []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		urls = append(urls, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, usagef("%s holds no URL", path)
	}
	return urls, nil
}

func (a *app) scrapeCmd() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "scrape URL",
		Short: "scrape one page as Markdown and/or HTML",
		Long: `scrape fetches one page (POST /scrape). On a terminal it prints the Markdown
(the HTML with --format html); piped, the whole answer as JSON. With -o FILE
the content is written there: Markdown for md, HTML for html, the JSON
answer for both.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "md", "html", "both":
			default:
				return usagef("--format is md, html or both, not %q", format)
			}
			r, err := a.call(cmd.Context(), "POST", "/scrape", map[string]any{"url": args[0], "format": format})
			if err != nil {
				return err
			}
			var s struct{ Markdown, HTML string }
			if err := json.Unmarshal(r.Body, &s); err != nil {
				return err
			}
			content := r.Body
			switch format {
			case "md":
				content = []byte(s.Markdown)
			case "html":
				content = []byte(s.HTML)
			}
			if out != "" {
				if err := os.WriteFile(out, content, 0o644); err != nil {
					return err
				}
				a.note("wrote %s (%d bytes)", out, len(content))
				a.receiptNote(r.Header)
				return nil
			}
			if a.human() && format != "both" {
				_, err = fmt.Fprintln(a.stdout, strings.TrimRight(string(content), "\n"))
				a.receiptNote(r.Header)
				return err
			}
			a.receiptNote(r.Header)
			return a.printJSON(r.Body)
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "md, html or both")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the content to FILE")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"md", "html", "both"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) searchCmd() *cobra.Command {
	var rich bool
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "search the region's index",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"q": {strings.Join(args, " ")}}
			if rich {
				q.Set("rich", "1")
			}
			r, err := a.call(cmd.Context(), "GET", "/search?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			if !a.human() {
				return a.printJSON(r.Body)
			}
			var s struct {
				Results []struct{ Title, URL, Snippet string }
				Rich    map[string]any
			}
			if err := json.Unmarshal(r.Body, &s); err != nil {
				return err
			}
			if len(s.Results) == 0 {
				fmt.Fprintln(a.stdout, "no results")
			}
			for i, res := range s.Results {
				fmt.Fprintf(a.stdout, "%2d. %s\n    %s\n    %s\n", i+1, res.Title, res.URL, clip(boldTags.ReplaceAllString(res.Snippet, ""), 200))
			}
			if len(s.Rich) > 0 {
				b, _ := json.MarshalIndent(s.Rich, "", "  ")
				fmt.Fprintf(a.stdout, "\nrich: %s\n", b)
			}
			a.receiptNote(r.Header)
			return nil
		},
	}
	cmd.Flags().BoolVar(&rich, "rich", false, "add the rich block (did you mean, entity, related queries, answer)")
	return cmd
}

func (a *app) answerCmd() *cobra.Command {
	var shallow bool
	cmd := &cobra.Command{
		Use:   "answer QUESTION",
		Short: "a direct answer from the region's index (experimental)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"q": {strings.Join(args, " ")}}
			if shallow {
				q.Set("deep", "0")
			}
			r, err := a.call(cmd.Context(), "GET", "/answer?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			if !a.human() {
				return a.printJSON(r.Body)
			}
			var s struct {
				Answered bool
				Answer   struct {
					Kind, Text string
					Sources    []struct{ Title, URL string }
				}
			}
			if err := json.Unmarshal(r.Body, &s); err != nil {
				return err
			}
			if !s.Answered {
				fmt.Fprintln(a.stdout, "no answer (try trawl search)")
				return nil
			}
			fmt.Fprintf(a.stdout, "%s\n", s.Answer.Text)
			for _, src := range s.Answer.Sources {
				fmt.Fprintf(a.stdout, "  — %s %s\n", src.Title, src.URL)
			}
			a.receiptNote(r.Header)
			return nil
		},
	}
	cmd.Flags().BoolVar(&shallow, "shallow", false, "answer only from what is readily available (deep=0)")
	return cmd
}

func (a *app) extractCmd() *cobra.Command {
	var schema, instruction string
	cmd := &cobra.Command{
		Use:   "extract URL",
		Short: "typed JSON from a page, by schema and/or instruction",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"url": args[0]}
			if schema != "" {
				b, err := os.ReadFile(schema)
				if err != nil {
					return usageError{err}
				}
				var s map[string]any
				if err := json.Unmarshal(b, &s); err != nil {
					return usagef("%s: a schema is a JSON object: %v", schema, err)
				}
				body["schema"] = s
			}
			if instruction != "" {
				body["instruction"] = instruction
			}
			if schema == "" && instruction == "" {
				return usagef("give --schema FILE, --instruction TEXT, or both")
			}
			r, err := a.call(cmd.Context(), "POST", "/extract", body)
			if err != nil {
				return err
			}
			a.receiptNote(r.Header)
			if a.human() {
				var s struct{ Data any }
				if json.Unmarshal(r.Body, &s) == nil {
					return a.printValue(s.Data)
				}
			}
			return a.printJSON(r.Body)
		},
	}
	cmd.Flags().StringVar(&schema, "schema", "", "a JSON schema file the result must match")
	cmd.Flags().StringVar(&instruction, "instruction", "", "what to extract, in plain words")
	return cmd
}

func (a *app) balanceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "balance",
		Short: "the account's credit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.call(cmd.Context(), "GET", "/v1/billing/balance", nil)
			if err != nil {
				return err
			}
			if !a.human() {
				return a.printJSON(r.Body)
			}
			var b map[string]any
			if err := json.Unmarshal(r.Body, &b); err != nil {
				return err
			}
			var rows [][]string
			for _, k := range []string{"account", "plan", "region", "balance", "total", "unsettled", "spend_cap", "cap_left", "month", "month_spent", "pass_expires"} {
				if v, ok := b[k]; ok && v != nil {
					rows = append(rows, []string{k, str(v)})
				}
			}
			if bk, ok := b["buckets"].(map[string]any); ok {
				for _, k := range []string{"monthly", "pass", "signup", "pack"} {
					rows = append(rows, []string{"  " + k, str(bk[k])})
				}
			}
			a.table([]string{"FIELD", "VALUE"}, rows)
			return nil
		},
	}
}

func (a *app) keysCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keys",
		Short: "the account's API keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.call(cmd.Context(), "GET", "/v1/keys", nil)
			if err != nil {
				return err
			}
			var k struct {
				Keys []map[string]any `json:"keys"`
			}
			if err := json.Unmarshal(r.Body, &k); err != nil {
				return err
			}
			if !a.human() {
				for _, key := range k.Keys {
					if err := a.printValue(key); err != nil {
						return err
					}
				}
				return nil
			}
			var rows [][]string
			for _, key := range k.Keys {
				cur := ""
				if key["current"] == true {
					cur = "*"
				}
				rows = append(rows, []string{cur + str(key["id"]), str(key["prefix"]), str(key["kind"]), str(key["role"]),
					str(key["created_at"]), str(key["expires_at"]), str(key["active"]), str(key["name"])})
			}
			a.table([]string{"ID", "PREFIX", "KIND", "ROLE", "CREATED", "EXPIRES", "ACTIVE", "NAME"}, rows)
			return nil
		},
	}
}

func (a *app) estimateCmd() *cobra.Command {
	var every string
	var units int
	cmd := &cobra.Command{
		Use:   "estimate ENDPOINT [URL|FILE]",
		Short: "what a call would cost, before making it (free)",
		Long: `estimate prices a call (POST /v1/estimate): ENDPOINT is scrape, batch, jobs,
extract, map, search, answer, recipe or monitor. scrape, extract, map and
monitor take a URL; batch and jobs a file of URLs, one a line ("-": stdin).`,
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: []string{"scrape", "batch", "jobs", "extract", "map", "search", "answer", "recipe", "monitor"},
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"endpoint": args[0]}
			ep := strings.Trim(strings.ToLower(args[0]), "/")
			if len(args) == 2 {
				switch ep {
				case "batch", "scrape/batch", "jobs", "job", "scrape/jobs":
					urls, err := a.readURLs(args[1])
					if err != nil {
						return err
					}
					body["urls"] = urls
				default:
					body["url"] = args[1]
				}
			}
			if every != "" {
				body["every"] = every
			}
			if units > 0 {
				body["units"] = units
			}
			r, err := a.call(cmd.Context(), "POST", "/v1/estimate", body)
			if err != nil {
				return err
			}
			if !a.human() {
				return a.printJSON(r.Body)
			}
			var e struct{ Min, Max, Text string }
			if err := json.Unmarshal(r.Body, &e); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s to %s credits\n%s\n", e.Min, e.Max, e.Text)
			return nil
		},
	}
	cmd.Flags().StringVar(&every, "every", "", "monitor: the check interval (default 1d)")
	cmd.Flags().IntVar(&units, "units", 0, "recipe: units of a run")
	return cmd
}

// needSub is the RunE of a command that only groups others.
func needSub(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(args) > 0 {
		return usagef("unknown command %q for %q (%s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
	return usagef("%s needs a command: %s", cmd.CommandPath(), strings.Join(names, ", "))
}

// sleepCtx waits d, or less when ctx ends (then false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
