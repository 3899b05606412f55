package fetch

import (
	"encoding/json"
	"time"
)

// Action types: the steps BrowserOptions.Actions can hold (Firecrawl's
// page actions, less pdf).
const (
	ActionWait       = "wait"
	ActionClick      = "click"
	ActionWrite      = "write"
	ActionPress      = "press"
	ActionScroll     = "scroll"
	ActionScreenshot = "screenshot"
	ActionScript     = "executeJavascript"
	ActionScrape     = "scrape"
)

// MaxActions bounds BrowserOptions.Actions.
const MaxActions = 50

// Action is one step the browser runs on the page, in order, after it has
// loaded (and after JS and WaitFor), before the page is captured. Which
// fields count depends on Type.
type Action struct {
	Type string
	// Wait (wait): a pause, ended early by the page deadline.
	Wait time.Duration
	// Selector: the element waited for (wait), clicked (click) or scrolled
	// (scroll; empty scrolls the page). A CSS selector.
	Selector string
	// All clicks every element Selector matches, not only the first.
	All bool
	// Text is typed into the focused element (write).
	Text string
	// Key is pressed (press): a key name ("Enter", "ArrowDown", "a").
	Key string
	// Up scrolls up rather than down (scroll).
	Up bool
	// FullPage shoots the whole page rather than the viewport
	// (screenshot).
	FullPage bool
	// Quality, 1 to 100, makes the screenshot a JPEG of that quality; 0 a
	// PNG.
	Quality int
	// Script is JavaScript run in the page (executeJavascript): an
	// expression, a function, or a function body with return; its value,
	// awaited, is the action's result.
	Script string
}

// ActionResults is what a page's actions produced, each list in the order
// of the actions that made it. Actions with no output (wait, click, write,
// press, scroll) add nothing.
type ActionResults struct {
	Screenshots []Image
	Scrapes     []PageCopy
	Scripts     []ScriptResult
}

// Image is a screenshot: its media type (image/png, image/jpeg) and bytes.
type Image struct {
	Type string
	Data []byte
}

// PageCopy is the page as a scrape action found it: its URL then, and its
// DOM serialised as HTML.
type PageCopy struct {
	URL  string
	HTML string
}

// ScriptResult is what a script returned: its JavaScript type (typeof:
// "string", "number", "object", "undefined"…) and its value as JSON (null
// when it has none JSON can hold).
type ScriptResult struct {
	Type  string
	Value json.RawMessage
}
