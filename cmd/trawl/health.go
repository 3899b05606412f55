package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// runHealth is `trawl health URL`: the health check of the container
// images (deploy/), which have no curl. It exits 0 when URL answers 2xx
// within 5 s.
func runHealth(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: trawl health URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", args[0], resp.Status)
	}
	return nil
}
