package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlhq/trawl/cmd/trawl/client"
)

func errorOf(status int, body []byte) error {
	return client.ErrorOf(status, http.Header{}, body)
}

func asClientError(err error) *client.Error {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// jobState is GET /scrape/jobs/{id} (docs/api.md, "Status").
type jobState struct {
	JobID                       string `json:"job_id"`
	Status                      string `json:"status"`
	Total, Pending, Done, Error int
}

func (a *app) jobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "background jobs of up to 10,000 URLs: submit, status, results, retry", RunE: needSub}
	var wait bool
	var format, idem string
	submit := &cobra.Command{
		Use:   "submit FILE",
		Short: "submit a file of URLs (one a line, \"-\": stdin) as a background job",
		Long: `submit sends the URLs of FILE as one job (POST /scrape/jobs), charged one unit
per fetchable URL before it starts, and prints its id. With --wait it shows
progress until the job is done and prints the final status; Ctrl-C stops
watching (the job runs on) and "trawl job status ID" picks it up again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			urls, err := a.readURLs(args[0])
			if err != nil {
				return err
			}
			if err := a.connect(); err != nil {
				return err
			}
			var h http.Header
			if idem != "" {
				h = http.Header{"Idempotency-Key": {idem}}
			}
			resp, err := a.c.Open(cmd.Context(), "POST", "/scrape/jobs", map[string]any{"urls": urls, "format": format}, h)
			if err != nil {
				return err
			}
			var b bytes.Buffer
			_, err = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			var sub struct {
				JobID string `json:"job_id"`
				Usage struct{ Units string }
			}
			if err := json.Unmarshal(b.Bytes(), &sub); err != nil || sub.JobID == "" {
				return fmt.Errorf("the gate's answer holds no job id: %.200s", b.String())
			}
			credits := first(sub.Usage.Units, client.ReceiptOf(resp.Header).Cost)
			if !wait {
				if a.human() {
					fmt.Fprintf(a.stdout, "submitted %s: %d URLs, %s credits\nfollow it: trawl job status %s\n", sub.JobID, len(urls), credits, sub.JobID)
					return nil
				}
				return a.printJSON(b.Bytes())
			}
			a.note("submitted %s: %d URLs, %s credits", sub.JobID, len(urls), credits)
			return a.follow(cmd.Context(), sub.JobID, credits)
		},
	}
	submit.Flags().BoolVar(&wait, "wait", false, "show progress until the job is done, then print its status")
	submit.Flags().StringVar(&format, "format", "md", "md, html or both, for every URL")
	submit.Flags().StringVar(&idem, "idempotency-key", "", "the same key again returns the same job, free (docs/api.md)")

	var once, waitStatus bool
	status := &cobra.Command{
		Use:   "status ID",
		Short: "a job's status; on a terminal, progress until it is done",
		Long: `status prints a job's status. On a terminal a running job is followed with
progress until it is done (--once: print it as it is now); piped, it is printed
once unless --wait.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Followed for a person (stdout and stderr terminals), or
			// when asked; a script gets the status as it is.
			if !once && (waitStatus || (a.human() && a.showProgress())) {
				return a.follow(cmd.Context(), args[0], "")
			}
			r, err := a.call(cmd.Context(), "GET", "/scrape/jobs/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			if a.human() {
				var s jobState
				if err := json.Unmarshal(r.Body, &s); err != nil {
					return err
				}
				a.jobTable(s)
				return nil
			}
			return a.printJSON(r.Body)
		},
	}
	status.Flags().BoolVar(&once, "once", false, "print the status as it is now, without following")
	status.Flags().BoolVar(&waitStatus, "wait", false, "follow until done even when not on a terminal")

	var after int
	results := &cobra.Command{
		Use:   "results ID",
		Short: "a job's result lines (NDJSON piped; a table on a terminal)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.jobResults(cmd.Context(), args[0], after)
		},
	}
	results.Flags().IntVar(&after, "after", 0, "skip the first N lines (lines already read)")

	var waitRetry bool
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "run a job's failed URLs again (charged per URL retried)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.call(cmd.Context(), "POST", "/scrape/jobs/"+url.PathEscape(args[0])+"/retry", nil)
			if err != nil {
				return err
			}
			var rt struct {
				Retried int
				Usage   struct{ Units string }
			}
			json.Unmarshal(r.Body, &rt)
			if waitRetry && rt.Retried > 0 {
				a.note("retrying %d URLs of %s, %s credits", rt.Retried, args[0], first(rt.Usage.Units, "0.000"))
				return a.follow(cmd.Context(), args[0], first(rt.Usage.Units, client.ReceiptOf(r.Header).Cost))
			}
			if a.human() {
				fmt.Fprintf(a.stdout, "retried %d URLs of %s\n", rt.Retried, args[0])
				return nil
			}
			return a.printJSON(r.Body)
		},
	}
	retry.Flags().BoolVar(&waitRetry, "wait", false, "show progress until the retried URLs are done")
	cmd.AddCommand(submit, status, results, retry)
	return cmd
}

func (a *app) jobTable(s jobState) {
	a.table([]string{"JOB", "STATUS", "TOTAL", "DONE", "ERROR", "PENDING"},
		[][]string{{s.JobID, s.Status, strconv.Itoa(s.Total), strconv.Itoa(s.Done), strconv.Itoa(s.Error), strconv.Itoa(s.Pending)}})
}

// pollEvery is the shortest time between two status polls.
const pollEvery = 500 * time.Millisecond

// pollInterval spaces polls so that they take at most half of the plan's
// requests a minute (X-RateLimit-Limit), leaving the rest to other calls.
func pollInterval(h http.Header) time.Duration {
	d := pollEvery
	if n, err := strconv.Atoi(h.Get("X-Ratelimit-Limit")); err == nil && n > 0 {
		d = max(d, 2*time.Minute/time.Duration(n))
	}
	return d
}

// follow polls a job with progress until it is done, then prints its
// status; Ctrl-C stops watching and says how to pick it up again. A 429
// while polling waits its Retry-After and goes on.
func (a *app) follow(ctx context.Context, id, credits string) error {
	pr := a.newProgress("job " + id)
	var last jobState
	var raw []byte
	for {
		r, err := a.call(ctx, "GET", "/scrape/jobs/"+url.PathEscape(id), nil)
		if err != nil {
			if ctx.Err() != nil {
				return a.interrupted(pr, id)
			}
			if ce := asClientError(err); ce != nil && (ce.Status == 429 || ce.Status == 503) {
				if !sleepCtx(ctx, max(ce.RetryAfter, time.Second)) {
					return a.interrupted(pr, id)
				}
				continue
			}
			pr.stop()
			return err
		}
		if err := json.Unmarshal(r.Body, &last); err != nil {
			pr.stop()
			return err
		}
		raw = r.Body
		pr.update(counts{Total: last.Total, Done: last.Done, Error: last.Error, Pending: last.Pending, Credits: credits})
		if last.Status == "done" || last.Status == "cancelled" {
			break
		}
		if !sleepCtx(ctx, pollInterval(r.Header)) {
			return a.interrupted(pr, id)
		}
	}
	pr.summary("results: trawl job results " + id)
	if a.human() {
		a.jobTable(last)
	} else if err := a.printJSON(raw); err != nil {
		return err
	}
	if last.Error > 0 {
		return &exitError{code: ExitPartial, msg: fmt.Sprintf("%d of %d URLs failed; run them again: trawl job retry %s", last.Error, last.Total, id)}
	}
	return nil
}

func (a *app) interrupted(pr *progress, id string) error {
	pr.summary("")
	return &exitError{code: ExitInterrupted, msg: fmt.Sprintf("stopped watching; the job runs on. Pick it up again: trawl job status %s", id)}
}

// jobResults pages through a job's results (500 lines a page, docs/api.md
// "Results") until an empty page.
func (a *app) jobResults(ctx context.Context, id string, after int) error {
	human := a.human()
	var rows [][]string
	for {
		r, err := a.call(ctx, "GET", fmt.Sprintf("/scrape/jobs/%s/results?after=%d", url.PathEscape(id), after), nil)
		if err != nil {
			if ce := asClientError(err); ce != nil && ce.Status == 429 && sleepCtx(ctx, max(ce.RetryAfter, time.Second)) {
				continue
			}
			return err
		}
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			n++
			if !human {
				a.stdout.Write(append(append([]byte(nil), line...), '\n'))
				continue
			}
			var l struct {
				URL, Error, Message string
				OK                  bool
				Result              struct {
					Status int
					Title  string
				}
			}
			json.Unmarshal(line, &l)
			if l.OK {
				rows = append(rows, []string{"ok", l.URL, strconv.Itoa(l.Result.Status), clip(l.Result.Title, 60)})
			} else {
				rows = append(rows, []string{"FAIL", l.URL, "", clip(strings.TrimSpace(l.Error+": "+l.Message), 60)})
			}
		}
		if n == 0 {
			break
		}
		after += n
	}
	if human {
		a.table([]string{"OK", "URL", "STATUS", "TITLE / ERROR"}, rows)
	}
	return nil
}
