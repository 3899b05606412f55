// Package cli is the client side of the trawl binary (issue 34): scrape,
// batch, jobs, crawl, search, answer, extract, monitors, recipes and
// billing from a terminal or a script, through a gate's public HTTP API
// only (package client), with the caller's key. docs/cli.md is its manual.
//
// Output: JSON (NDJSON for lists and streams) on stdout when stdout is not
// a terminal, tables and text on a terminal (--json forces JSON). Errors
// go to stderr with the gate's message, and the exit code says what kind
// of failure it was (the Exit* constants). Progress of long work goes to
// stderr when stderr is a terminal, unless --quiet.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/trawlhq/trawl/cmd/trawl/client"
)

// Exit codes: fixed, documented in docs/cli.md; scripts test them.
const (
	ExitOK          = 0
	ExitError       = 1 // anything else: a site that failed, a network error, a bug
	ExitUsage       = 2 // a wrong command line, or a request the gate refused as malformed (400, 409, 413)
	ExitAuth        = 3 // 401, or 403 for the key (not a site's block page)
	ExitPayment     = 4 // 402: out of credit or over the spend cap
	ExitNotFound    = 5 // 404: no such job, monitor, recipe, key
	ExitRateLimited = 6 // 429: over the plan's rate or concurrency
	ExitServer      = 7 // 5xx from the service (not a site that failed)
	ExitPartial     = 8 // long work finished but some URLs failed
	ExitInterrupted = 130
)

// Commands are the client's top-level commands: main dispatches these
// names to Run ("crawl" and "recipe" only in their client forms, see
// IsClientCrawl and IsClientRecipe).
var Commands = []string{"scrape", "batch", "job", "crawl", "search", "answer", "extract",
	"monitor", "recipe", "balance", "estimate", "keys", "login", "completion",
	cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd}

// ServerCommand is a subcommand main serves itself, listed so that shell
// completion offers it too.
type ServerCommand struct{ Name, Short string }

// IsClientCrawl reports whether `trawl crawl ARGS` is the client's site
// crawl (it names a URL to crawl) rather than the crawl server (which
// takes only flags).
func IsClientCrawl(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") {
			return true
		}
	}
	return false
}

// IsClientRecipe reports whether `trawl recipe ARGS` is the client's
// (the gate's catalog and runs) rather than the local runner of
// docs/recipes.md: `recipe new`, a recipe directory, --local, and the
// local runner's own flags (--input, --session, --allow-private-networks)
// stay local.
func IsClientRecipe(args []string) bool {
	if len(args) == 0 || (args[0] != "list" && args[0] != "run") {
		return false
	}
	for _, a := range args[1:] {
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		if strings.HasPrefix(a, "-") && (name == "local" || name == "input" || name == "session" || name == "allow-private-networks") {
			return false
		}
	}
	if args[0] == "run" && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		if fi, err := os.Stat(args[1]); err == nil && fi.IsDir() {
			return false
		}
	}
	return true
}

// LocalRecipeArgs drops the --local switch the client's rule reads.
func LocalRecipeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a != "--local" && a != "-local" {
			out = append(out, a)
		}
	}
	return out
}

// app is one invocation's state.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	// flags of the root
	url, key   string
	jsonOut    bool
	quiet      bool
	configPath string // tests and docs: where the config file is (default: UserConfigDir)

	c *client.Client
}

// Run runs the client with args (os.Args[1:]) and returns the exit code.
// server lists main's own subcommands, for completion.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, server []ServerCommand) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.root(server)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	return a.exit(err)
}

// usageError is a wrong command line.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError ends the command with a code after its message was printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func (a *app) exit(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(a.stderr, "trawl: %s\n", ee.msg)
		}
		return ee.code
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(a.stderr, "trawl: %s\n", describe(ce))
		return codeOf(ce)
	}
	if errors.Is(err, context.Canceled) && a.ctx.Err() != nil {
		fmt.Fprintln(a.stderr, "trawl: interrupted")
		return ExitInterrupted
	}
	fmt.Fprintf(a.stderr, "trawl: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// isCobraUsage reports cobra's own command-line errors (unknown flag,
// wrong argument count), which it returns as plain errors.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "unknown command", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// codeOf maps a gate's answer to the exit code table.
func codeOf(e *client.Error) int {
	switch {
	case e.Status == http.StatusUnauthorized:
		return ExitAuth
	case e.Status == http.StatusForbidden:
		if e.Code == "blocked" || e.Code == "host_refused" {
			return ExitError // the site's refusal, not the key's
		}
		return ExitAuth
	case e.Status == http.StatusPaymentRequired:
		return ExitPayment
	case e.Status == http.StatusNotFound:
		return ExitNotFound
	case e.Status == http.StatusTooManyRequests:
		return ExitRateLimited
	case e.Status == http.StatusBadRequest, e.Status == http.StatusConflict, e.Status == http.StatusRequestEntityTooLarge:
		return ExitUsage
	case e.Status == http.StatusBadGateway && e.Code == "fetch_failed":
		return ExitError // the site did not answer
	case e.Status >= 500:
		return ExitServer
	}
	return ExitError
}

// describe is an error answer as one message: the gate's sentence, and
// what to do about it.
func describe(e *client.Error) string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("%s (%d", msg, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	s += ")"
	switch e.Status {
	case http.StatusPaymentRequired:
		if t := e.Actions["topup"]; t != "" && strings.Contains(msg, t) {
			// The gate's sentence names the top-up already.
		} else if t != "" {
			s += "\n  top up: " + t
			if c := e.Actions["checkout"]; c != "" {
				s += "  (or pay on a checkout page: " + c + ")"
			}
		} else if r := e.Actions["raise_api"]; r != "" {
			s += "\n  raise the cap: " + r
		}
	case http.StatusTooManyRequests:
		if e.RetryAfter > 0 {
			s += fmt.Sprintf("\n  retry after %ds", int(e.RetryAfter.Seconds()))
		}
	case http.StatusUnauthorized:
		s += "\n  check the key: --key, TRAWL_API_KEY, or `trawl login`"
	}
	return s
}

func (a *app) root(server []ServerCommand) *cobra.Command {
	root := &cobra.Command{
		Use:   "trawl",
		Short: "trawl: a self-hostable web data service, and its client",
		Long: `trawl's client: scrape, batch, jobs, crawl, search, answer, extract, monitors,
recipes and billing through a gate's public API (docs/cli.md).

The gate and key come from --url/--key, else TRAWL_URL/TRAWL_API_KEY, else the
config file "trawl login" writes. Output is JSON (NDJSON for lists and streams)
when stdout is not a terminal, tables on a terminal.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "the gate's base URL (default: $TRAWL_URL, the config file, else http://127.0.0.1:8080)")
	pf.StringVar(&a.key, "key", "", "API key (default: $TRAWL_API_KEY, else the config file)")
	pf.BoolVar(&a.jsonOut, "json", false, "JSON (NDJSON for lists) on stdout even on a terminal")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "no progress and no summaries on stderr (errors still)")
	root.AddCommand(a.scrapeCmd(), a.batchCmd(), a.jobCmd(), a.crawlCmd(), a.searchCmd(), a.answerCmd(),
		a.extractCmd(), a.monitorCmd(), a.recipeCmd(), a.balanceCmd(), a.estimateCmd(), a.keysCmd(), a.loginCmd())
	for _, s := range server {
		if root.Commands() != nil && hasCommand(root, s.Name) {
			continue
		}
		root.AddCommand(&cobra.Command{Use: s.Name, Short: s.Short, DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error { return usagef("%s is served by the trawl binary itself", s.Name) }})
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	return root
}

func hasCommand(root *cobra.Command, name string) bool {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return true
		}
	}
	return false
}

// connect resolves the gate and key (flag > env > config file) into a.c.
func (a *app) connect() error {
	if a.c != nil {
		return nil
	}
	cfg, _ := loadConfig(a.configFile())
	url := first(a.url, os.Getenv("TRAWL_URL"), cfg.URL, "http://127.0.0.1:8080")
	key := first(a.key, os.Getenv("TRAWL_API_KEY"), cfg.Key)
	if key == "" {
		return usagef("no API key: pass --key, set TRAWL_API_KEY, or run `trawl login`")
	}
	// No overall timeout: batches and result pages stream for as long as
	// they take; single calls set their own deadline.
	a.c = &client.Client{URL: url, Key: key, HTTP: &http.Client{}}
	return nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// call is one request with the spec's 130 s bound (a browser page takes
// up to 90 s, §8).
func (a *app) call(ctx context.Context, method, path string, body any) (*client.Response, error) {
	if err := a.connect(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 130*time.Second)
	defer cancel()
	return a.c.Call(ctx, method, path, body)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// human reports whether stdout gets tables rather than JSON.
func (a *app) human() bool { return !a.jsonOut && isTerminal(a.stdout) }

// showProgress reports whether progress bars are drawn (on stderr): a
// terminal that knows its size (a pseudo-terminal of 0×0, as `script`
// makes without one, gets the summary only: the bar would have no room).
func (a *app) showProgress() bool {
	if a.quiet || !isTerminal(a.stderr) {
		return false
	}
	w, h, err := term.GetSize(int(a.stderr.(*os.File).Fd()))
	return err == nil && w > 0 && h > 0
}

// note prints a line for people on stderr, unless --quiet.
func (a *app) note(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, format+"\n", args...)
	}
}

// printJSON writes raw JSON as one line (NDJSON-safe), or indented on a
// terminal.
func (a *app) printJSON(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		_, err := a.stdout.Write(raw)
		return err
	}
	return a.printValue(v)
}

func (a *app) printValue(v any) error {
	var b []byte
	var err error
	if isTerminal(a.stdout) {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// receiptNote prints a call's cost and balance on stderr (people only).
func (a *app) receiptNote(h http.Header) {
	r := client.ReceiptOf(h)
	if r.Cost != "" && a.human() {
		a.note("cost %s credits, balance %s", r.Cost, r.Balance)
	}
}
