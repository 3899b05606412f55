package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) recipeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipe",
		RunE:  needSub,
		Short: "the gate's recipes: list, run NAME key=value…",
		Long: `recipe list shows the gate's recipe catalog; recipe run NAME key=value… runs
one there (key:=JSON passes a JSON value as it is; other values are converted
to the input's type from the catalog). The local runner of docs/recipes.md
(trawl recipe run DIR|NAME --input k=v, recipe new, and --local) stays as it was.`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "the gate's recipe catalog",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat, raw, err := a.recipes(cmd.Context())
			if err != nil {
				return err
			}
			if !a.human() {
				for _, r := range raw {
					if err := a.printJSON(r); err != nil {
						return err
					}
				}
				return nil
			}
			var rows [][]string
			for _, r := range cat {
				var in []string
				for _, i := range r.Inputs {
					s := i.Name + ":" + i.Type
					if i.Required {
						s += "*"
					}
					in = append(in, s)
				}
				rows = append(rows, []string{r.Name, strconv.Itoa(r.Version), r.Stage, r.Health.Status, r.Run, strings.Join(in, " "), clip(r.Title, 40)})
			}
			a.table([]string{"NAME", "VERSION", "STAGE", "HEALTH", "RUN", "INPUTS (* required)", "TITLE"}, rows)
			return nil
		},
	}
	var bypass bool
	run := &cobra.Command{
		Use:   "run NAME [key=value|key:=json]...",
		Short: "run a recipe on the gate",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := a.recipeInputs(cmd.Context(), args[0], args[1:])
			if err != nil {
				return err
			}
			if bypass {
				body["bypass_cache"] = true
			}
			r, err := a.call(cmd.Context(), "POST", "/recipes/"+url.PathEscape(args[0]), body)
			if err != nil {
				return err
			}
			a.receiptNote(r.Header)
			if a.human() {
				var res struct {
					Rows  []map[string]any
					JobID string `json:"job_id"`
				}
				if json.Unmarshal(r.Body, &res) == nil && res.JobID == "" {
					return a.printValue(res.Rows)
				}
			}
			return a.printJSON(r.Body)
		},
	}
	run.Flags().BoolVar(&bypass, "bypass-cache", false, "run again even when a fresh result is cached")
	cmd.AddCommand(list, run)
	return cmd
}

type recipeEntry struct {
	Name, Title, Stage, Run string
	Version                 int
	Health                  struct{ Status string }
	Inputs                  []struct {
		Name, Type string
		Required   bool
	}
}

// recipes reads the catalog (GET /recipes, free).
func (a *app) recipes(ctx context.Context) ([]recipeEntry, []json.RawMessage, error) {
	r, err := a.call(ctx, "GET", "/recipes", nil)
	if err != nil {
		return nil, nil, err
	}
	var c struct {
		Recipes []json.RawMessage `json:"recipes"`
	}
	if err := json.Unmarshal(r.Body, &c); err != nil {
		return nil, nil, err
	}
	out := make([]recipeEntry, len(c.Recipes))
	for i, raw := range c.Recipes {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, nil, err
		}
		// health is an object with status (catalog) or a string.
		var h struct {
			Health json.RawMessage `json:"health"`
		}
		if json.Unmarshal(raw, &h) == nil {
			var s string
			if json.Unmarshal(h.Health, &s) == nil {
				out[i].Health.Status = s
			}
		}
	}
	return out, c.Recipes, nil
}

// recipeInputs turns key=value arguments into a run's body, typed by the
// catalog's inputs (key:=json is taken as it is).
func (a *app) recipeInputs(ctx context.Context, name string, args []string) (map[string]any, error) {
	body := map[string]any{}
	types := map[string]string{}
	needTypes := false
	for _, arg := range args {
		if !strings.Contains(arg, ":=") {
			needTypes = true
		}
	}
	if needTypes && len(args) > 0 {
		cat, _, err := a.recipes(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range cat {
			if r.Name == name {
				for _, in := range r.Inputs {
					types[in.Name] = in.Type
				}
			}
		}
	}
	for _, arg := range args {
		if k, raw, ok := strings.Cut(arg, ":="); ok && !strings.Contains(k, "=") {
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return nil, usagef("%s: not JSON: %v", arg, err)
			}
			body[k] = v
			continue
		}
		k, v, ok := strings.Cut(arg, "=")
		if !ok || k == "" {
			return nil, usagef("want key=value or key:=json, not %q", arg)
		}
		switch types[k] {
		case "integer":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, usagef("%s is an integer, not %q", k, v)
			}
			body[k] = n
		case "boolean":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, usagef("%s is a boolean, not %q", k, v)
			}
			body[k] = b
		default:
			body[k] = v
		}
	}
	return body, nil
}
