package crawl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// Two crawl servers of a region share their tasks through a real
// JetStream node: tasks submitted to one run on both, each stored once
// by the one that accepted it, with the results a local run gives; a
// server that closes mid-task hands it back and the other runs it.
func TestSharedTasks(t *testing.T) {
	n := jsnodetest.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := n.JetStream()
	if err := jsnode.Ensure(ctx, js, jsnode.RegionLayout(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	st := startSite(t)
	a := startServer(t, Config{MaxConcurrentTasks: 2})
	b := startServer(t, Config{MaxConcurrentTasks: 2})
	if err := a.Share(ctx, js, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Share(ctx, js, "c2"); err != nil {
		t.Fatal(err)
	}

	const tasks = 12
	var ids []string
	for i := range tasks {
		ids = append(ids, submit(t, a.URL, "", map[string]any{
			"urls": []string{fmt.Sprintf("%s/article.html?t=%d", st.URL, i), fmt.Sprintf("%s/products.html?t=%d", st.URL, i)}}))
	}
	for _, id := range ids {
		ans := poll(t, a.URL, "", id, 50*time.Millisecond, 2*time.Minute)
		if ans.Status != StatusCompleted || len(ans.Results) != 2 {
			t.Fatalf("task %s: %s %q, %d results", id, ans.Status, ans.Error, len(ans.Results))
		}
		for _, r := range ans.Results {
			if !r.Success || r.Markdown == "" {
				t.Fatalf("task %s: result %s success=%v markdown %.80q", id, r.URL, r.Success, r.Markdown)
			}
		}
	}
	sa, sb := a.ShareStats(), b.ShareStats()
	t.Logf("c1 ran %d, c2 ran %d; c1 stored %d outcomes", sa.Ran, sb.Ran, sa.Applied)
	// Which server ran what is the queue's business (c1's runners may
	// take them all); that c2 runs the region's tasks is shown below.
	if sa.Applied != tasks || sa.Ran+sb.Ran < tasks {
		t.Fatalf("stats c1 %+v, c2 %+v", sa, sb)
	}

	// Four tasks held by a slow page, two on each server's two runners;
	// c2 closes: it hands its two back, and c1 runs them once the page
	// answers.
	var slow []string
	for i := range 4 {
		slow = append(slow, submit(t, a.URL, "", map[string]any{"urls": fmt.Sprintf("%s/slow?t=%d", st.URL, i)}))
	}
	testwait.Until(t, 30*time.Second, "every runner on a slow task", func() bool {
		return a.ShareStats().Running == 2 && b.ShareStats().Running == 2
	})
	b.stop()
	st.release()
	for _, id := range slow {
		ans := poll(t, a.URL, "", id, 50*time.Millisecond, time.Minute)
		if ans.Status != StatusCompleted || ans.Result == nil || !ans.Result.Success {
			t.Fatalf("slow task %s: %+v", id, ans)
		}
	}
	if st := a.ShareStats(); st.Redelivered != 2 || st.Applied != tasks+4 || st.Duplicates != 0 {
		t.Fatalf("after c2 closed: c1 %+v", st)
	}
	t.Logf("after c2 closed mid-task: c1 %+v", a.ShareStats())
}

// A cell whose data directory was lost while it was down loses no
// accepted task (mirror.go): back on an empty directory under its name,
// its server restores the finished tasks from their outcomes in the log
// (results and all), and the unfinished ones as pending, which the
// region's queue gives back and which complete; until it has, an id it
// does not know is a 503, not a 404.
func TestSharedTasksRestoredAfterLostStore(t *testing.T) {
	n := jsnodetest.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := n.JetStream()
	if err := jsnode.Ensure(ctx, js, jsnode.RegionLayout(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	st := startSite(t)
	a := startServer(t, Config{MaxConcurrentTasks: 2, AwaitShare: time.Minute})
	if err := a.Share(ctx, js, "c1"); err != nil {
		t.Fatal(err)
	}
	var fast, slow []string
	for i := range 3 {
		fast = append(fast, submit(t, a.URL, "", map[string]any{"urls": fmt.Sprintf("%s/article.html?r=%d", st.URL, i)}))
	}
	before := map[string]*taskAnswer{}
	for _, id := range fast {
		before[id] = poll(t, a.URL, "", id, 50*time.Millisecond, time.Minute)
		if before[id].Status != StatusCompleted {
			t.Fatalf("task %s: %+v", id, before[id])
		}
	}
	for i := range 2 {
		slow = append(slow, submit(t, a.URL, "", map[string]any{"urls": fmt.Sprintf("%s/slow?r=%d", st.URL, i)}))
	}
	testwait.Until(t, 30*time.Second, "both runners on a slow task", func() bool { return a.ShareStats().Running == 2 })
	a.stop() // its disk is then lost: the next server starts on a new directory

	b := startServer(t, Config{MaxConcurrentTasks: 2, AwaitShare: time.Minute})
	var ans taskAnswer
	if code := call(t, "GET", b.URL+"/task/"+fast[0], "", nil, &ans); code != 503 {
		t.Fatalf("before sharing, a task of the lost directory: %d, want 503 try_again", code)
	}
	if err := b.Share(ctx, js, "c1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range fast {
		got := poll(t, b.URL, "", id, 50*time.Millisecond, 5*time.Second)
		if got.Status != StatusCompleted || got.Result == nil || got.Result.Markdown != before[id].Result.Markdown {
			t.Fatalf("restored task %s: %+v, want its results as before", id, got)
		}
	}
	st.release()
	for _, id := range slow {
		got := poll(t, b.URL, "", id, 50*time.Millisecond, time.Minute)
		if got.Status != StatusCompleted || got.Result == nil || !got.Result.Success {
			t.Fatalf("unfinished task %s after the restore: %+v", id, got)
		}
	}
	if code := call(t, "GET", b.URL+"/task/00000000-0000-4000-8000-000000000000", "", nil, nil); code != 404 {
		t.Errorf("an unknown task after the restore: %d, want 404", code)
	}
	t.Logf("restored: %+v", b.ShareStats())
}
