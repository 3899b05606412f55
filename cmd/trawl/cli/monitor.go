package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) monitorCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "monitor", Short: "watch pages for changes: create, list, events", RunE: needSub}
	var watch, every, webhook, secret, name string
	create := &cobra.Command{
		Use:   "create URL",
		Short: "watch a page (or find the account's monitor with that URL and watch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"url": args[0]}
			for k, v := range map[string]string{"watch": watch, "every": every, "name": name} {
				if v != "" {
					body[k] = v
				}
			}
			if webhook != "" {
				n := map[string]any{"webhook": webhook}
				if secret != "" {
					n["secret"] = secret
				}
				body["notify"] = n
			}
			r, err := a.call(cmd.Context(), "POST", "/monitors", body)
			if err != nil {
				return err
			}
			if a.human() {
				var m map[string]any
				if json.Unmarshal(r.Body, &m) == nil {
					verb := "created"
					if m["created"] == false {
						verb = "exists"
					}
					fmt.Fprintf(a.stdout, "%s %s: %s every %s\n", verb, str(m["id"]), str(m["url"]), str(m["every"]))
					return nil
				}
			}
			return a.printJSON(r.Body)
		},
	}
	create.Flags().StringVar(&watch, "watch", "", "what to report, in plain sentences (default: any real change)")
	create.Flags().StringVar(&every, "every", "", "longest wait between checks: 4m, 15m, 1h, 6h, 1d (default), 1w")
	create.Flags().StringVar(&webhook, "webhook", "", "URL each confirmed change is POSTed to")
	create.Flags().StringVar(&secret, "secret", "", "signs the webhook's POSTs")
	create.Flags().StringVar(&name, "name", "", "a label")
	list := &cobra.Command{
		Use:   "list",
		Short: "the account's monitors, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.call(cmd.Context(), "GET", "/monitors", nil)
			if err != nil {
				return err
			}
			var l struct {
				Monitors []map[string]any `json:"monitors"`
			}
			if err := json.Unmarshal(r.Body, &l); err != nil {
				return err
			}
			if !a.human() {
				for _, m := range l.Monitors {
					if err := a.printValue(m); err != nil {
						return err
					}
				}
				return nil
			}
			var rows [][]string
			for _, m := range l.Monitors {
				rows = append(rows, []string{str(m["id"]), clip(str(m["url"]), 50), str(m["every"]), str(m["health"]), str(m["paused"]), clip(str(m["watch"]), 40)})
			}
			a.table([]string{"ID", "URL", "EVERY", "HEALTH", "PAUSED", "WATCH"}, rows)
			return nil
		},
	}
	var follow bool
	var interval time.Duration
	var since string
	events := &cobra.Command{
		Use:   "events ID",
		Short: "a monitor's timeline, oldest first (--follow: keep printing new events)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.monitorEvents(cmd.Context(), args[0], since, follow, interval)
		},
	}
	events.Flags().BoolVarP(&follow, "follow", "f", false, "keep polling for new events until Ctrl-C")
	events.Flags().DurationVar(&interval, "interval", 15*time.Second, "--follow: time between two polls")
	events.Flags().StringVar(&since, "since", "", "events at or after this time (ISO 8601 or unix seconds)")
	cmd.AddCommand(create, list, events)
	return cmd
}

func (a *app) monitorEvents(ctx context.Context, id, since string, follow bool, interval time.Duration) error {
	var last float64 = -1
	for {
		q := url.Values{"limit": {"500"}}
		if since != "" {
			q.Set("since", since)
		}
		r, err := a.call(ctx, "GET", "/monitors/"+url.PathEscape(id)+"/events?"+q.Encode(), nil)
		if err != nil {
			if follow && ctx.Err() != nil {
				return &exitError{code: ExitInterrupted}
			}
			if ce := asClientError(err); follow && ce != nil && ce.Status == 429 {
				sleepCtx(ctx, max(ce.RetryAfter, interval))
				continue
			}
			return err
		}
		var e struct {
			Events []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil {
			return err
		}
		for _, ev := range e.Events {
			n, _ := ev["id"].(float64)
			if n <= last {
				continue
			}
			last = n
			if a.human() {
				at := first(str(ev["confirmed_at"]), str(ev["first_seen"]), str(ev["at"]))
				text := first(str(ev["summary"]), str(ev["message"]))
				fmt.Fprintf(a.stdout, "%-4s %-6s %s  %s\n", str(ev["id"]), str(ev["event"]), at, text)
			} else if err := a.printValue(ev); err != nil {
				return err
			}
			if t := first(str(ev["first_seen"]), str(ev["at"])); t != "" {
				since = t
			}
		}
		if !follow {
			return nil
		}
		if !sleepCtx(ctx, interval) {
			return &exitError{code: ExitInterrupted}
		}
	}
}
