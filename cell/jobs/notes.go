package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
)

// Notes: a value an owner keeps beside one of its jobs in the region's
// log, the last one a name (`trawl.job.<owner>.<job>.note.<name>`), for
// the cells that answer for the job while its owner is down or its id is
// placed on them, and for the owner back on an empty disk: a crawl's
// credits (cell/v2_crawl.go). A note goes with its job (forget purges
// the job's subjects).

// PutNote writes name's value for job id, which this cell owns, to the
// log. A cell that does not share writes nothing.
func (m *Manager) PutNote(id, name string, data []byte) error {
	s := m.mirrored()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	return s.logPublish(ctx, jsnode.JobSubject(m.cfg.Cell, id)+".note."+name, data, nil)
}

// Note is name's value for account's job id in the log; nil when it has
// none, or the cell does not share. Another account's job is ErrNoJob.
func (m *Manager) Note(id, account, name string) ([]byte, error) {
	s := m.share.Load()
	if s == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	_, owner, err := s.logMeta(ctx, id, account)
	if err != nil {
		return nil, err
	}
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, jsnode.JobSubject(owner, id)+".note."+name)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return msg.Data, nil
}
