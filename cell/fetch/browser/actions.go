package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/cell/fetch"
)

// DefaultElementWait is EngineConfig.ElementWait's default.
const DefaultElementWait = 30 * time.Second

// ErrAction means a page action (BrowserOptions.Actions) failed: its
// element did not appear in time, the browser refused it (an unknown
// key), its script threw. The error is an *ActionError naming the action.
var ErrAction = errors.New("page action failed")

// ActionError is the failure of one page action.
type ActionError struct {
	// Index is the action's place in BrowserOptions.Actions, from 0.
	Index int
	// Type is the action's type (fetch.ActionClick…).
	Type string
	Err  error
}

func (e *ActionError) Error() string {
	return fmt.Sprintf("action %d (%s): %v", e.Index, e.Type, e.Err)
}

func (e *ActionError) Unwrap() []error { return []error{ErrAction, e.Err} }

// checkActions refuses actions the engine cannot run, before a page is
// opened for them.
func checkActions(acts []fetch.Action) error {
	if len(acts) > fetch.MaxActions {
		return fmt.Errorf("%w: at most %d actions (got %d)", ErrOptions, fetch.MaxActions, len(acts))
	}
	for i, a := range acts {
		var bad string
		switch a.Type {
		case fetch.ActionWait:
			if (a.Wait > 0) == (a.Selector != "") {
				bad = "a wait needs a duration or a selector, not both"
			}
		case fetch.ActionClick:
			if a.Selector == "" {
				bad = "a click needs a selector"
			}
		case fetch.ActionPress:
			if a.Key == "" {
				bad = "a press needs a key"
			}
		case fetch.ActionScreenshot:
			if a.Quality < 0 || a.Quality > 100 {
				bad = "a screenshot's quality is 1 to 100"
			}
		case fetch.ActionScript:
			if a.Script == "" {
				bad = "executeJavascript needs a script"
			}
		case fetch.ActionWrite, fetch.ActionScroll, fetch.ActionScrape:
		default:
			bad = fmt.Sprintf("unknown action type %q", a.Type)
		}
		if bad != "" {
			return fmt.Errorf("%w: action %d: %s", ErrOptions, i, bad)
		}
	}
	return nil
}

// actionWaits is what the actions' pauses add to the page's default
// deadline.
func actionWaits(acts []fetch.Action) time.Duration {
	var d time.Duration
	for _, a := range acts {
		d += a.Wait
	}
	return d
}

// actionRun is the state of one page's actions.
type actionRun struct {
	e      *Engine
	pctx   context.Context
	page   playwright.Page
	res    fetch.ActionResults
	budget int64 // bytes the results may still take
}

// runActions runs acts on page in order. An action that fails is an
// *ActionError; past the page deadline (or with the caller gone) the
// error is the deadline's, as for any other step.
func (e *Engine) runActions(ctx, pctx context.Context, page playwright.Page, acts []fetch.Action) (*fetch.ActionResults, error) {
	run := &actionRun{e: e, pctx: pctx, page: page, budget: 4 * e.cfg.MaxBodyBytes}
	for i, a := range acts {
		err := run.do(a)
		switch {
		case err == nil:
			continue
		case ctx.Err() != nil || pctx.Err() != nil:
			return nil, e.failed(ctx, pctx, fmt.Sprintf("action %d (%s)", i, a.Type), fetch.ErrUnreachable, err)
		case errors.Is(err, fetch.ErrTooLarge):
			return nil, fmt.Errorf("action %d (%s): %w", i, a.Type, err)
		}
		return nil, &ActionError{Index: i, Type: a.Type, Err: trim(err)}
	}
	return &run.res, nil
}

// do runs one action. An element that did not come in time is said so,
// rather than in playwright's words.
func (r *actionRun) do(a fetch.Action) error {
	start := time.Now()
	err := r.act(a)
	if a.Selector != "" && errors.Is(err, playwright.ErrTimeout) && r.pctx.Err() == nil {
		took := time.Since(start).Round(100 * time.Millisecond)
		if a.Type == fetch.ActionWait {
			return fmt.Errorf("no element matching %q appeared within %s", a.Selector, took)
		}
		return fmt.Errorf("no element matching %q could be %sed within %s", a.Selector, a.Type, took)
	}
	return err
}

// act runs one action.
func (r *actionRun) act(a fetch.Action) error {
	switch a.Type {
	case fetch.ActionWait:
		if a.Selector != "" {
			return r.page.Locator(a.Selector).First().WaitFor(playwright.LocatorWaitForOptions{
				State: playwright.WaitForSelectorStateAttached, Timeout: r.elementWait()})
		}
		return pause(r.pctx, a.Wait)
	case fetch.ActionClick:
		return r.click(a)
	case fetch.ActionWrite:
		return r.page.Keyboard().Type(a.Text)
	case fetch.ActionPress:
		return r.page.Keyboard().Press(a.Key)
	case fetch.ActionScroll:
		if a.Selector == "" {
			_, err := r.page.Evaluate(scrollPage, a.Up)
			return err
		}
		_, err := r.page.Locator(a.Selector).First().Evaluate(scrollElement, a.Up, playwright.LocatorEvaluateOptions{Timeout: r.elementWait()})
		return err
	case fetch.ActionScreenshot:
		return r.screenshot(a)
	case fetch.ActionScript:
		return r.script(a.Script)
	case fetch.ActionScrape:
		html, err := capture(r.pctx, r.page)
		if err != nil {
			return err
		}
		if err := r.spend(len(html)); err != nil {
			return err
		}
		r.res.Scrapes = append(r.res.Scrapes, fetch.PageCopy{URL: r.page.URL(), HTML: html})
		return nil
	}
	return fmt.Errorf("%w: unknown action type %q", ErrOptions, a.Type)
}

// elementWait is how long an action waits for its element: ElementWait,
// and never more than half the time left before the page deadline, so
// that an element that never appears fails its action with time left to
// answer, rather than the whole page at its deadline.
func (r *actionRun) elementWait() *float64 {
	d := min(r.e.cfg.ElementWait, time.Until(deadline(r.pctx))/2)
	return playwright.Float(float64(max(d.Milliseconds(), 1)))
}

// click clicks the first element the selector matches, or each of them.
func (r *actionRun) click(a fetch.Action) error {
	loc := r.page.Locator(a.Selector)
	if !a.All {
		return loc.First().Click(playwright.LocatorClickOptions{Timeout: r.elementWait()})
	}
	if err := loc.First().WaitFor(playwright.LocatorWaitForOptions{State: playwright.WaitForSelectorStateAttached, Timeout: r.elementWait()}); err != nil {
		return err
	}
	all, err := loc.All()
	if err != nil {
		return err
	}
	for _, el := range all {
		if err := el.Click(playwright.LocatorClickOptions{Timeout: r.elementWait()}); err != nil {
			return err
		}
	}
	return nil
}

// screenshot shoots the viewport or the whole page: a PNG, or a JPEG of
// the quality asked.
func (r *actionRun) screenshot(a fetch.Action) error {
	opts := playwright.PageScreenshotOptions{
		FullPage: playwright.Bool(a.FullPage),
		Type:     playwright.ScreenshotTypePng,
		Timeout:  playwright.Float(msUntil(r.pctx)),
	}
	media := "image/png"
	if a.Quality > 0 {
		opts.Type, opts.Quality, media = playwright.ScreenshotTypeJpeg, playwright.Int(a.Quality), "image/jpeg"
	}
	shot, err := r.page.Screenshot(opts)
	if err != nil {
		return err
	}
	if err := r.spend(len(shot)); err != nil {
		return err
	}
	r.res.Screenshots = append(r.res.Screenshots, fetch.Image{Type: media, Data: shot})
	return nil
}

// scriptResult runs a script as the JS option runs (an expression, a
// function, or a function body with return or await), awaits its value
// and hands back its typeof and its JSON, which the page writes itself so
// that what comes back is exactly JSON.stringify's (null for undefined,
// functions and values it cannot write); a value over max bytes comes
// back as its length only.
const scriptResult = `async ([src, max]) => {
  let v;
  try {
    v = (0, eval)(src);
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    v = (0, eval)("(async () => {\n" + src + "\n})()");
  }
  if (typeof v === "function") v = v();
  v = await v;
  let json;
  try { json = JSON.stringify(v); } catch (e) { json = undefined; }
  if (json === undefined) json = "null";
  if (json.length > max) return { type: typeof v, tooLarge: json.length };
  return { type: typeof v, json };
}`

// script runs an executeJavascript action and keeps its value.
func (r *actionRun) script(src string) error {
	out, err := r.page.Evaluate(scriptResult, []any{src, r.budget})
	if err != nil {
		return err
	}
	m, _ := out.(map[string]any)
	typ, _ := m["type"].(string)
	if n, ok := m["tooLarge"]; ok {
		return fmt.Errorf("%w: the script's value is %v bytes of JSON", fetch.ErrTooLarge, n)
	}
	js, _ := m["json"].(string)
	if !json.Valid([]byte(js)) {
		js = "null"
	}
	if err := r.spend(len(js)); err != nil {
		return err
	}
	r.res.Scripts = append(r.res.Scripts, fetch.ScriptResult{Type: typ, Value: json.RawMessage(js)})
	return nil
}

// spend takes n bytes from the results' budget: the actions' output
// together is at most four times the page's own limit.
func (r *actionRun) spend(n int) error {
	if r.budget -= int64(n); r.budget < 0 {
		return fmt.Errorf("%w: the actions' results are over %d bytes", fetch.ErrTooLarge, 4*r.e.cfg.MaxBodyBytes)
	}
	return nil
}

// Scrolls by a screen: the window's height, or the element's own.
const (
	scrollPage    = `up => window.scrollBy(0, (up ? -1 : 1) * window.innerHeight)`
	scrollElement = `(el, up) => el.scrollBy(0, (up ? -1 : 1) * (el.clientHeight || window.innerHeight))`
)

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
