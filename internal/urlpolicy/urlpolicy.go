// Package urlpolicy is which URLs trawl may fetch or deliver to, and which
// addresses it may dial: one policy for the cell's engines, its webhook
// sender and the gate's estimates, so a URL the gate prices is a URL a
// cell would fetch.
package urlpolicy

import "errors"

// Errors of Validate and of a dial the policy refuses, to be tested with
// errors.Is (cell/fetch returns them too).
var (
	ErrInvalidURL = errors.New("url is not valid")
	ErrScheme     = errors.New("url must start with http:// or https://")
	ErrNotPublic  = errors.New("url host is not public")
)
