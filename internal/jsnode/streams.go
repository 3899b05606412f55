package jsnode

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The region's streams and buckets (docs/jetstream-design.md §2).
const (
	StreamWork = "TRAWL_WORK" // work items: job URLs, tasks, recipe runs, checks
	// StreamJobLog is the replicated copy of each shared job: its
	// record, its URLs and the outcome of each URL, which also travels
	// back to the owner on it (cell/jobs/mirror.go).
	StreamJobLog = "TRAWL_JOBLOG"
	// BucketBlobs holds an outcome too large for a message, as long as
	// the job log keeps its job.
	BucketBlobs = "TRAWL_BLOBS"
	// ConsumerJob is the one durable consumer of job URLs, pulled by
	// every cell.
	ConsumerJob = "job"
	// ConsumerTaskHi and ConsumerTaskLo are the durable consumers of
	// crawl-server tasks of priority ≥ 5 and below.
	ConsumerTaskHi = "task-hi"
	ConsumerTaskLo = "task"
	// ConsumerCheck is the durable consumer of due monitor checks the
	// region's scheduler queued, pulled by every cell.
	ConsumerCheck = "check"
	// ConsumerRecipe is the durable consumer of background recipe runs,
	// pulled by every cell (cell/recipe/share.go).
	ConsumerRecipe = "recipe"
	BucketLease    = "TRAWL_LEASE" // the coordinator's lease
	BucketIdem     = "TRAWL_IDEM"  // submission idempotency keys
	BucketTasks    = "TRAWL_TASKS" // crawl-server task records
	// StreamPages carries each page a cell archives to the one other
	// cell of the region that indexes it beside it (cell/pages.go): the
	// last version of each page, kept so that a cell back on an empty
	// disk indexes again what it held.
	StreamPages = "TRAWL_PAGES"
)

// Subjects of the work streams and the job log.
const (
	SubjectWorkJob    = "trawl.work.job."    // + Token(job)
	SubjectTaskHi     = "trawl.work.task.hi" // priority ≥ 5
	SubjectTaskLo     = "trawl.work.task.lo"
	SubjectRecipe     = "trawl.work.recipe." // + Token(job): one subject a run, so its owner can tell it is queued
	SubjectCheck      = "trawl.work.check"
	SubjectJobLog     = "trawl.job."    // + owner cell + "." + Token(job) + "." + kind
	SubjectTaskResult = "trawl.task."   // + owner cell + "." + task id: a crawl task's outcome
	SubjectRecipeRun  = "trawl.recipe." // + owner cell + "." + Token(job): a background recipe run's outcome
	SubjectPages      = "trawl.page."   // + indexing cell + "." + archiving cell + "." + hash of the URL
	LeaseCoordinator  = "coordinator"   // the lease's key in BucketLease
	leaseTTL          = 6 * time.Second
	workAckWait       = 15 * time.Second
	// checkAckWait is a monitor check's: a check of a cell that died is
	// run by another within seconds (a monitor is checked every few
	// minutes at most; its page, not its check, takes the time).
	checkAckWait      = 6 * time.Second
	workMaxMsgSize    = 1 << 20
	workMaxBytes      = 2 << 30
	duplicateWindow   = 10 * time.Minute
	idempotencyTTL    = 24 * time.Hour
	taskRecordTTL     = 24 * time.Hour
	jobLogRetentionUp = time.Hour // the log outlives a job's view by this
	// pagesMaxAge and pagesMaxBytes bound the page copies kept for a
	// cell that comes back on an empty disk; the oldest go first (each
	// was indexed when it came: only that replay loses them).
	pagesMaxAge   = 30 * 24 * time.Hour
	pagesMaxBytes = 1 << 30
)

// PageSubject is where cell origin sends its copy of the page at url to
// cell indexer (one subject a page and pair: the stream keeps the last).
func PageSubject(indexer, origin, url string) string {
	h := fnv.New64a()
	h.Write([]byte(url))
	return SubjectPages + indexer + "." + origin + "." + strconv.FormatUint(h.Sum64(), 36)
}

// PagesConsumer is cell's durable consumer of the pages other cells
// send it to index.
func PagesConsumer(cell string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       "pages-" + cell,
		FilterSubject: SubjectPages + cell + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1, // a page is indexed or the cell is gone
		MaxAckPending: 1024,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
}

// OwnPagesFilter matches the copies of the pages cell archived, wherever
// they went: a cell back on an empty disk reads them again.
func OwnPagesFilter(cell string) string { return SubjectPages + "*." + cell + ".*" }

// Token is a job id as one subject token: NATS reads "." as a separator,
// and regions and cells are [a-z0-9], so "-" for "." is reversible.
func Token(id string) string { return strings.ReplaceAll(id, ".", "-") }

// Untoken is the id a Token was made from.
func Untoken(tok string) string { return strings.ReplaceAll(tok, "-", ".") }

// JobSubject is the prefix of job's subjects in the job log, owned by
// cell owner; what follows is ".meta" (its record, the last one kept),
// ".urls.<n>" (its submitted URLs, in chunks) and ".res.<seq>" (the
// outcome of its URL seq, the last one kept). job "*" matches every job
// of the owner.
func JobSubject(owner, job string) string { return SubjectJobLog + owner + "." + Token(job) }

// ResultSubject is where the outcome of URL seq of job, owned by cell
// owner, is published.
func ResultSubject(owner, job string, seq uint64) string {
	return JobSubject(owner, job) + ".res." + strconv.FormatUint(seq, 10)
}

// ResultsConsumer is cell's durable consumer of the outcomes of its
// jobs' URLs: one per cell. The outcomes stay in the log after the ack
// (a cell that lost its disk restores its jobs from them); a cell that
// is down finds its outcomes waiting when it is back.
func ResultsConsumer(cell string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       "res-" + cell,
		FilterSubject: JobSubject(cell, "*") + ".res.*",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1, // an outcome is never dropped
		MaxAckPending: 1024,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
}

// TaskResultSubject is where the outcome of crawl-server task id, owned
// by cell owner, is published (in the job log: kept as long as a job's).
func TaskResultSubject(owner, id string) string { return SubjectTaskResult + owner + "." + Token(id) }

// TaskRecordSubject is where crawl-server task id, accepted by cell
// owner, is recorded as accepted (in the job log, the last one kept): a
// cell back on an empty disk restores its tasks from these and their
// outcomes (cell/crawl/mirror.go). It is not an outcome: the results
// consumer's filter (one token after the owner) does not match it.
func TaskRecordSubject(owner, id string) string { return TaskResultSubject(owner, id) + ".rec" }

// TaskResultsConsumer is cell's durable consumer of the outcomes of the
// crawl-server tasks it accepted (cell/crawl/share.go).
func TaskResultsConsumer(cell string) jetstream.ConsumerConfig {
	c := ResultsConsumer(cell)
	c.Durable = "tres-" + cell
	c.FilterSubject = SubjectTaskResult + cell + ".*"
	return c
}

// RecipeResultSubject is where the outcome of background recipe run job,
// accepted by cell owner, is published (in the job log).
func RecipeResultSubject(owner, job string) string {
	return SubjectRecipeRun + owner + "." + Token(job)
}

// SubjectOwner is the owner cell a subject under prefix names
// (prefix + owner + "." + …: SubjectJobLog, SubjectTaskResult,
// SubjectRecipeRun); "" when subject is not under prefix.
func SubjectOwner(prefix, subject string) string {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return ""
	}
	owner, _, _ := strings.Cut(rest, ".")
	return owner
}

// RecipeRecordSubject is where background recipe run job is recorded as
// accepted (who owns it, which recipe, when; never its inputs): a cell
// reads it to answer for a down owner, and an owner back on an empty
// disk restores its runs from it. The results consumer's filter does not
// match it.
func RecipeRecordSubject(owner, job string) string { return RecipeResultSubject(owner, job) + ".rec" }

// RecipeResultsConsumer is cell's durable consumer of the outcomes of
// the background recipe runs it accepted.
func RecipeResultsConsumer(cell string) jetstream.ConsumerConfig {
	c := ResultsConsumer(cell)
	c.Durable = "rres-" + cell
	c.FilterSubject = SubjectRecipeRun + cell + ".*"
	return c
}

// RecipeMaxDeliver is how many times a background recipe run is
// delivered to be run; the delivery after the last fails it rather than
// run it again.
const RecipeMaxDeliver = 3

// TaskMaxDeliver is how many times a crawl task is delivered: each
// delivery after the first is a cell that died (or closed) running it;
// the runner that takes this delivery fails it rather than run it again
// (the consumer itself delivers without a limit).
const TaskMaxDeliver = 10

// JobMaxDeliver is the same for a job's URL: the puller that takes this
// delivery records the URL failed (cut off) rather than fetch it again.
// A limit on the consumer instead left a URL whose deliveries met dying
// cells undelivered until its owner published it again (Republish, 10
// minutes).
const JobMaxDeliver = 10

// Replicas is the number of replicas of every stream and bucket for a
// region of cells cells: 1, 2, or 3 from three on (§1 "Replicas").
func Replicas(cells int) int {
	return min(max(cells, 1), 3)
}

// Layout is what Ensure creates.
type Layout struct {
	Streams   []jetstream.StreamConfig
	Consumers []Consumer
	Buckets   []jetstream.KeyValueConfig
	Objects   []jetstream.ObjectStoreConfig
	// Retired consumers and streams are deleted where they exist (an
	// earlier build made them).
	Retired        []Consumer
	RetiredStreams []string
}

// Consumer is a durable consumer of a stream.
type Consumer struct {
	Stream string
	Config jetstream.ConsumerConfig
}

// RegionLayout is the region's streams, consumers and buckets at the
// given number of replicas; jobRetention is how long a job is kept
// (--job-retention: the log keeps it an hour longer).
func RegionLayout(replicas int, jobRetention time.Duration) Layout {
	if jobRetention <= 0 {
		jobRetention = 7 * 24 * time.Hour // jobs.Config.Retention's default
	}
	work := jetstream.StreamConfig{
		Name: StreamWork,
		// trawl.work.hookretry is retired (below), kept so that a cell of
		// an earlier build, whose layout has a consumer of it, can still
		// Ensure its layout during a rolling upgrade.
		Subjects:   []string{SubjectWorkJob + ">", "trawl.work.task.*", SubjectRecipe + "*", SubjectCheck, "trawl.work.hookretry"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Replicas:   replicas,
		Duplicates: duplicateWindow,
		MaxMsgSize: workMaxMsgSize,
		MaxBytes:   workMaxBytes,
		// A full queue refuses new work rather than drop accepted work.
		Discard: jetstream.DiscardNew,
	}
	log := jetstream.StreamConfig{
		Name:              StreamJobLog,
		Subjects:          []string{SubjectJobLog + ">", SubjectTaskResult + ">", SubjectRecipeRun + ">"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		MaxAge:            jobRetention + jobLogRetentionUp,
		MaxMsgsPerSubject: 1,
		Duplicates:        duplicateWindow,
		MaxMsgSize:        workMaxMsgSize,
	}
	pages := jetstream.StreamConfig{
		Name:              StreamPages,
		Subjects:          []string{SubjectPages + ">"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		MaxAge:            pagesMaxAge,
		MaxBytes:          pagesMaxBytes,
		MaxMsgsPerSubject: 1,
		MaxMsgSize:        workMaxMsgSize,
		Discard:           jetstream.DiscardOld,
	}
	consumer := func(stream, name, filter string, maxDeliver, maxAckPending int) Consumer {
		return Consumer{Stream: stream, Config: jetstream.ConsumerConfig{
			Durable:       name,
			FilterSubject: filter,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       workAckWait,
			MaxDeliver:    maxDeliver,
			MaxAckPending: maxAckPending,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			ReplayPolicy:  jetstream.ReplayInstantPolicy,
		}}
	}
	// A check is delivered until it runs: a limit left one whose few
	// deliveries met dying cells in the queue until its claim lapsed
	// (minutes); a queued check whose claim lapsed is dropped by the
	// cell that takes it (cell/monitor RunClaimed), as the scheduler
	// claims it again.
	checks := consumer(StreamWork, ConsumerCheck, SubjectCheck, -1, 1024)
	checks.Config.AckWait = checkAckWait
	return Layout{
		Streams: []jetstream.StreamConfig{work, log, pages},
		Consumers: []Consumer{
			consumer(StreamWork, ConsumerJob, SubjectWorkJob+">", -1, 4096),
			// Tasks and recipe runs are delivered until a runner sends
			// an outcome: the runner that takes the TaskMaxDeliver-th (or
			// RecipeMaxDeliver-th) delivery fails it. A limit here would
			// leave one whose last runner died undelivered, without an
			// outcome, for good.
			consumer(StreamWork, ConsumerTaskHi, SubjectTaskHi, -1, 256),
			consumer(StreamWork, ConsumerTaskLo, SubjectTaskLo, -1, 256),
			consumer(StreamWork, ConsumerRecipe, SubjectRecipe+"*", -1, 256),
			checks,
		},
		// The job webhooks' tokens of the first design (§5): webhooks are
		// delivered as marks in the job log instead, so nothing used
		// them (three Raft groups a region kept for nothing).
		Retired: []Consumer{{Stream: StreamWork, Config: jetstream.ConsumerConfig{Durable: "hookretry"}},
			{Stream: "TRAWL_HOOKS", Config: jetstream.ConsumerConfig{Durable: "hook"}}},
		RetiredStreams: []string{"TRAWL_HOOKS"},
		Buckets: []jetstream.KeyValueConfig{
			{Bucket: BucketLease, TTL: leaseTTL, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
			{Bucket: BucketIdem, TTL: idempotencyTTL, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
			{Bucket: BucketTasks, TTL: taskRecordTTL, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		},
		Objects: []jetstream.ObjectStoreConfig{
			{Bucket: BucketBlobs, TTL: jobRetention + jobLogRetentionUp, Storage: jetstream.FileStorage, Replicas: replicas},
		},
	}
}

// Ensure creates what the layout names, or updates it to the layout; it
// is idempotent, and every cell calls it at start. It never lowers a
// stream's or bucket's replicas: a region that shrank keeps its copies
// until an operator removes the dead cell (§8).
//
// A consumer gets its stream's replicas, set rather than inherited: a
// consumer left at Replicas 0 followed its stream up only a minute or so
// after the stream (TestGrowOneToThree), so a region's work consumers
// stayed on their first cell alone while the others were being killed,
// and were moved to three peers in the middle of it
// (TestMonitorsSurviveKillLoop lost the queued checks of four monitors
// then). The server refuses a consumer more replicas than its stream has
// caught up to (10126, "replica count exceeds parent stream") for as
// long as the stream's new peers catch up, about a minute on a loaded
// machine: Ensure fails until then, so a joining cell shares only once
// the region's consumers are raised, and they never move under load.
func Ensure(ctx context.Context, js jetstream.JetStream, l Layout) error {
	for _, c := range l.Retired {
		if err := js.DeleteConsumer(ctx, c.Stream, c.Config.Durable); err != nil &&
			!errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("jsnode: retired consumer %s/%s: %w", c.Stream, c.Config.Durable, err)
		}
	}
	for _, name := range l.RetiredStreams {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("jsnode: retired stream %s: %w", name, err)
		}
	}
	replicas := map[string]int{}
	for _, cfg := range l.Streams {
		r, err := ensureStream(ctx, js, cfg)
		if err != nil {
			return err
		}
		replicas[cfg.Name] = r
	}
	for _, c := range l.Consumers {
		if c.Config.Replicas == 0 {
			c.Config.Replicas = replicas[c.Stream]
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config); err != nil {
			return fmt.Errorf("jsnode: consumer %s/%s: %w", c.Stream, c.Config.Durable, err)
		}
	}
	for _, cfg := range l.Buckets {
		if cur, err := currentReplicas(ctx, js, "KV_"+cfg.Bucket); err != nil {
			return fmt.Errorf("jsnode: bucket %s: %w", cfg.Bucket, err)
		} else if cur > cfg.Replicas {
			cfg.Replicas = cur
		}
		if _, err := js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("jsnode: bucket %s: %w", cfg.Bucket, err)
		}
	}
	for _, cfg := range l.Objects {
		if cur, err := currentReplicas(ctx, js, "OBJ_"+cfg.Bucket); err != nil {
			return fmt.Errorf("jsnode: object store %s: %w", cfg.Bucket, err)
		} else if cur > cfg.Replicas {
			cfg.Replicas = cur
		}
		if _, err := js.CreateOrUpdateObjectStore(ctx, cfg); err != nil {
			return fmt.Errorf("jsnode: object store %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// ensureStream creates or updates a stream, never lowering its replicas,
// and returns the replicas it has now.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (int, error) {
	cur, err := currentReplicas(ctx, js, cfg.Name)
	if err != nil {
		return 0, fmt.Errorf("jsnode: stream %s: %w", cfg.Name, err)
	}
	if cur > cfg.Replicas {
		cfg.Replicas = cur
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return 0, fmt.Errorf("jsnode: stream %s: %w", cfg.Name, err)
	}
	return cfg.Replicas, nil
}

// currentReplicas is a stream's replicas, 0 if it does not exist.
func currentReplicas(ctx context.Context, js jetstream.JetStream, name string) (int, error) {
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().Config.Replicas, nil
}
