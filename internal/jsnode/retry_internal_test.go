package jsnode

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestUnanswered(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("get: %w", jetstream.ErrNoStreamResponse), true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 3"}, false},
		{jetstream.ErrMsgNotFound, false},
	} {
		if got := Unanswered(tt.err); got != tt.want {
			t.Errorf("Unanswered(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
