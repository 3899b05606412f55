package gate

import (
	"context"
	"net/http"
)

type pipelineKey struct{}

// WithPipeline returns ctx carrying h: the gate's whole handler chain
// (trawl_trace → trawl_auth → trawl_ratelimit → trawl_body → trawl_meter → trawl_api →
// trawl_route, with its error routes), as a request entering the gate's
// listener goes through it. trawl_api sets it on the requests of a Relay
// route (the tool server), whose calls go through the gate again.
func WithPipeline(ctx context.Context, h http.Handler) context.Context {
	return context.WithValue(ctx, pipelineKey{}, h)
}

// PipelineFrom returns the pipeline WithPipeline set, or nil.
func PipelineFrom(ctx context.Context) http.Handler {
	h, _ := ctx.Value(pipelineKey{}).(http.Handler)
	return h
}
