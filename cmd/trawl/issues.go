package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/trawlhq/trawl/gate/issues"
)

// runIssues is "trawl issues": the problems customers reported to the
// operators (report_issue, POST /v1/issues), newest first, from a gate's
// GET /operator/v1/issues with an operator key (--key, or
// TRAWL_OPERATOR_KEY; the operator API's, never a customer key).
func runIssues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("issues", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gateURL := fs.String("url", "http://127.0.0.1:8080", "a region's gate (each region keeps its own reports)")
	limit := fs.Int("limit", 100, "at most this many reports (1 to 500)")
	asJSON := fs.Bool("json", false, "print the gate's JSON as it is")
	key := fs.String("key", os.Getenv("TRAWL_OPERATOR_KEY"), "an operator key (default $TRAWL_OPERATOR_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" {
		return errors.New("an operator key is needed: --key or TRAWL_OPERATOR_KEY (docs/operations.md)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/operator/v1/issues?limit=%d", strings.TrimSuffix(*gateURL, "/"), *limit), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+*key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	var list struct {
		Region string          `json:"region"`
		Issues []issues.Report `json:"issues"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REFERENCE\tCREATED\tACCOUNT\tVIA\tTITLE")
	for _, is := range list.Issues {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", is.Reference, is.CreatedAt.Format("2006-01-02 15:04:05"), is.Account, is.Via, is.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, is := range list.Issues {
		fmt.Fprintf(stdout, "\n%s — %s\n%s\n", is.Reference, is.Title, is.WhatHappened)
	}
	return nil
}
