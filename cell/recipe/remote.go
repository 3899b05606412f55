package recipe

import (
	"context"
	"time"

	"github.com/trawlhq/trawl/internal/recipestore"
)

// Remote is where a cell reads the region's replicated operator recipes
// (internal/recipestore: its gate, from the ledger).
type Remote interface {
	// List names the recipes at the newest version; changed is false
	// (and refs nil) when it is still since.
	List(ctx context.Context, since uint64) (version uint64, refs []recipestore.Ref, changed bool, err error)
	// Get reads one recipe: its manifest and body files.
	Get(ctx context.Context, name string) (manifest []byte, files map[string][]byte, err error)
}

// syncRemote brings the replicated recipes up to the remote's version and
// reports whether they changed. A recipe that does not load (a newer
// trawl's manifest) is logged and left out; one that cannot be fetched
// now leaves the set as it was until the next look.
func (s *Service) syncRemote(ctx context.Context) bool {
	if s.cfg.Remote == nil {
		return false
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.mu.RLock()
	since, have := s.remoteVer, s.remote
	s.mu.RUnlock()
	version, refs, changed, err := s.cfg.Remote.List(ctx, since)
	if err != nil {
		// Said once per cause, not every ReloadEvery while the gate is
		// away (a cell that has not joined yet has none).
		if msg := err.Error(); msg != s.remoteErr {
			s.remoteErr = msg
			s.cfg.Logger.Warn("replicated recipes: not listed; asking again every reload", "err", err)
		}
		return false
	}
	if s.remoteErr != "" {
		s.remoteErr = ""
		s.cfg.Logger.Info("replicated recipes: the gate answers again")
	}
	if !changed {
		return false
	}
	next := map[string]*Recipe{}
	for _, ref := range refs {
		if r, ok := have[ref.Name]; ok && r.Hash == ref.Hash {
			next[ref.Name] = r
			continue
		}
		manifest, files, err := s.cfg.Remote.Get(ctx, ref.Name)
		if err != nil {
			s.cfg.Logger.Warn("replicated recipes: not fetched; trying again later", "name", ref.Name, "err", err)
			return false
		}
		r, err := Parse(manifest, files)
		if err != nil {
			s.cfg.Logger.Warn("replicated recipe not loaded", "name", ref.Name, "err", err)
			continue
		}
		if r.Name != ref.Name {
			s.cfg.Logger.Warn("replicated recipe not loaded: its manifest names another", "name", ref.Name, "manifest", r.Name)
			continue
		}
		next[r.Name] = r
	}
	s.mu.Lock()
	s.remote, s.remoteVer = next, version
	s.mu.Unlock()
	if err := s.Reload(); err != nil {
		s.cfg.Logger.Warn("recipes not reloaded", "err", err)
	}
	return true
}
