package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/crawl"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/cell/llm"
)

// crawlOpts are the crawl server's own flags; trawl cell and trawl dev
// take them with --crawl-listen.
type crawlOpts struct {
	listen       string
	maxTasks     int
	maxQueued    int
	pages        int
	maxBrowsers  int
	ttl          time.Duration
	janitorEvery time.Duration
	llmBase      map[string]string
	llmProvider  string
	llmKeyFile   string
	viewport     string
	cors         string
	pageCache    time.Duration
}

func crawlFlags(fs *flag.FlagSet, o *crawlOpts, listenName, listenDefault, listenUsage string) {
	fs.StringVar(&o.listen, listenName, listenDefault, listenUsage)
	fs.IntVar(&o.maxTasks, "max-concurrent-tasks", 0, "crawl tasks running at once (default $MAX_CONCURRENT_TASKS, else 5)")
	fs.IntVar(&o.maxQueued, "max-queued-tasks", crawl.DefaultMaxQueuedTasks, "crawl tasks waiting for a slot; beyond it POST /crawl answers 503 \"No available slots\"")
	fs.IntVar(&o.maxBrowsers, "crawl-browsers", 6, "hot and cold browsers of the crawl pool besides the permanent one")
	fs.DurationVar(&o.ttl, "task-ttl", crawl.DefaultTTL, "how long a finished crawl task is kept when its request sets no ttl")
	fs.DurationVar(&o.janitorEvery, "janitor-every", crawl.DefaultJanitorEvery, "period of the crawl pool's janitor")
	fs.StringVar(&o.viewport, "default-viewport", fmt.Sprintf("%dx%d", crawl.DefaultViewport.Width, crawl.DefaultViewport.Height),
		"WxH: the permanent browser's window (Crawl4AI's default 1080x600); requests with another viewport get a cold, then hot, browser")
	fs.StringVar(&o.cors, "cors-origins", "*", "origins a web page may call the crawl server from: * (any, as Crawl4AI v0.4), a comma-separated list, or none")
	fs.DurationVar(&o.pageCache, "crawl-cache-for", crawl.DefaultFreshFor, "how long the crawl server serves a page fetched without a browser from its cache (0: no cache)")
	o.llmBase = map[string]string{}
	fs.Var(vendorURLs(o.llmBase), "llm-base-url", "VENDOR=URL: OpenAI-compatible endpoint of an LLM vendor (repeat; also $<VENDOR>_BASE_URL); the key comes from $<VENDOR>_API_KEY")
	fs.StringVar(&o.llmProvider, "llm-provider", os.Getenv("TRAWL_LLM_PROVIDER"), "VENDOR/MODEL: the operator's one model, for /extract and for crawl llm extractions that name no provider (default $TRAWL_LLM_PROVIDER; none: /extract runs its deterministic extractor); its endpoint is --llm-base-url VENDOR=URL or $<VENDOR>_BASE_URL, its key $<VENDOR>_API_KEY or --llm-api-key-file")
	fs.StringVar(&o.llmKeyFile, "llm-api-key-file", "", "a file holding the key of --llm-provider's vendor (instead of $<VENDOR>_API_KEY)")
}

// getenv is os.Getenv, with the key of --llm-api-key-file as
// <VENDOR>_API_KEY of --llm-provider's vendor.
func (o *crawlOpts) getenv() (func(string) string, error) {
	if o.llmKeyFile == "" {
		return os.Getenv, nil
	}
	b, err := os.ReadFile(o.llmKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--llm-api-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	vendor, _, ok := llm.ParseProvider(o.llmProvider)
	if !ok {
		return nil, errors.New("--llm-api-key-file needs --llm-provider VENDOR/MODEL")
	}
	name := llm.EnvPrefix(vendor) + "_API_KEY"
	return func(k string) string {
		if k == name {
			return key
		}
		return os.Getenv(k)
	}, nil
}

// model is the operator's model for /extract (nil without
// --llm-provider): the same client package, endpoint and key as the crawl
// server's llm strategy.
func (o *crawlOpts) model() (*extract.ModelConfig, error) {
	if strings.TrimSpace(o.llmProvider) == "" {
		return nil, nil
	}
	getenv, err := o.getenv()
	if err != nil {
		return nil, err
	}
	client, err := llm.New(llm.Config{Getenv: getenv, BaseURLs: o.llmBase}, o.llmProvider, "")
	if err != nil {
		return nil, fmt.Errorf("--llm-provider: %w", err)
	}
	return &extract.ModelConfig{Client: client}, nil
}

// vendorURLs is --llm-base-url, VENDOR=URL, repeated.
type vendorURLs map[string]string

func (v vendorURLs) String() string {
	var parts []string
	for k, u := range v {
		parts = append(parts, k+"="+u)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (v vendorURLs) Set(s string) error {
	for _, one := range strings.Split(s, ",") {
		k, u, ok := strings.Cut(strings.TrimSpace(one), "=")
		if !ok || k == "" || u == "" {
			return errors.New("want VENDOR=URL, e.g. openai=http://127.0.0.1:8000/v1")
		}
		v[strings.ToLower(k)] = u
	}
	return nil
}

// config turns the flags into a crawl.Config; env supplies
// SERVICE_API_TOKEN and MAX_CONCURRENT_TASKS (a flag wins over the env).
func (o *crawlOpts) config(dataDir string, allowPrivate bool, maxPage int64, pages int, logger *slog.Logger) (crawl.Config, error) {
	cfg := crawl.Config{DataDir: dataDir, AllowPrivateNetworks: allowPrivate, MaxQueuedTasks: o.maxQueued,
		DefaultTTL: o.ttl, PagesPerBrowser: pages, MaxBrowsers: o.maxBrowsers, JanitorEvery: o.janitorEvery, Logger: logger}
	cfg.Engine.MaxBodyBytes = maxPage
	cfg.Extract.BaseURLs = o.llmBase
	cfg.Extract.DefaultProvider = strings.TrimSpace(o.llmProvider)
	getenv, err := o.getenv()
	if err != nil {
		return cfg, err
	}
	cfg.Extract.Getenv = getenv
	cfg.FreshFor = o.pageCache
	if o.pageCache <= 0 {
		cfg.FreshFor = -1
	}
	w, h, ok := strings.Cut(strings.ToLower(strings.TrimSpace(o.viewport)), "x")
	vw, err1 := strconv.Atoi(w)
	vh, err2 := strconv.Atoi(h)
	if !ok || err1 != nil || err2 != nil || vw < 100 || vh < 100 || vw > 7680 || vh > 7680 {
		return cfg, fmt.Errorf("--default-viewport %q: want WxH, each from 100 to 7680 (e.g. 1080x600)", o.viewport)
	}
	cfg.DefaultViewport = fetch.Viewport{Width: vw, Height: vh}
	switch c := strings.TrimSpace(o.cors); c {
	case "*", "":
	case "none":
		cfg.NoCORS = true
	default:
		for _, origin := range strings.Split(c, ",") {
			if origin = strings.TrimSpace(origin); origin != "" {
				cfg.CORSOrigins = append(cfg.CORSOrigins, origin)
			}
		}
	}
	if err := cfg.FromEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if o.maxTasks > 0 {
		cfg.MaxConcurrentTasks = o.maxTasks
	}
	if err := browser.CheckInstall(cfg.Browser); err != nil {
		return cfg, fmt.Errorf("the crawl server renders every page in Chromium: %w (run `make deps-browser`)", err)
	}
	return cfg, nil
}

// runningCrawl is a crawl server serving HTTP.
type runningCrawl struct {
	srv    *crawl.Server
	addr   string
	errc   chan error
	cancel context.CancelFunc
}

func startCrawl(ctx context.Context, cfg crawl.Config, listen string, logger *slog.Logger) (*runningCrawl, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	srv, err := crawl.New(ctx, cfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	rc := &runningCrawl{srv: srv, addr: l.Addr().String(), errc: make(chan error, 1)}
	sctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	go func() { rc.errc <- serve(sctx, l, srv.Handler(), logger) }()
	logger.Info("crawl server serving", "addr", rc.addr, "data", cfg.DataDir, "token", cfg.Token != "",
		"max_concurrent_tasks", cfg.MaxConcurrentTasks, "allow_private_networks", cfg.AllowPrivateNetworks)
	return rc, nil
}

func (rc *runningCrawl) stop(logger *slog.Logger) error {
	if rc == nil {
		return nil
	}
	rc.cancel()
	err := errors.Join(<-rc.errc, rc.srv.Close())
	logger.Info("crawl server stopped")
	return err
}

func runCrawl(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o crawlOpts
	crawlFlags(fs, &o, "listen", crawl.DefaultListen, "address of the crawl server")
	data := fs.String("data", "./data", "data directory (tasks live in DATA/crawl)")
	allowPrivate := fs.Bool("allow-private-networks", false, "allow crawling loopback and private addresses (local use and tests only)")
	maxPage := fs.Int64("max-page-bytes", 10<<20, "largest rendered page accepted")
	pages := fs.Int("browser-pages", 4, "pages each pool browser renders at once")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsFlag(fs)
	gpu := fs.Bool("gpu", os.Getenv("TRAWL_CRAWL_GPU") == "1", "render with the machine's NVIDIA GPU (the gpu image sets TRAWL_CRAWL_GPU=1); refuses to start without one")
	var proxies []fetch.ProxySpec
	var escalate string
	fs.Var(&proxiesFlag{dst: &proxies}, "proxy", "an upstream proxy of the engine ladder, KIND[:COUNTRY]=URL (as trawl cell's --proxy); repeat it")
	fs.Var((*escalateFlag)(&escalate), "escalate-proxy", "proxy kind (isp or residential) of the engine ladder's last step (as trawl cell's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *gpu && !gpuPresent() {
		// docs/spec/crawl-server.md §7: the gpu variant without a GPU.
		return errors.New("GPU not found: install the NVIDIA drivers and run the container with --gpus all")
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	shutdown, err := setupTelemetry(ctx, "trawl-crawl", logger)
	if err != nil {
		return err
	}
	defer shutdown(context.Background())
	cfg, err := o.config(*data, *allowPrivate, *maxPage, *pages, logger)
	if err != nil {
		return err
	}
	cfg.Proxies, cfg.EscalateProxy = proxies, escalate
	cfg.Browser.GPU = *gpu
	rc, err := startCrawl(ctx, cfg, o.listen, logger)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-rc.errc:
		rc.errc <- err
	}
	return rc.stop(logger)
}

// gpuDevices are where an NVIDIA GPU shows itself to a container run with
// --gpus all (the NVIDIA container toolkit mounts them). A variable so
// tests can point it elsewhere.
var gpuDevices = []string{"/dev/nvidia0", "/proc/driver/nvidia/version"}

// gpuPresent reports whether the machine shows an NVIDIA GPU.
func gpuPresent() bool {
	for _, p := range gpuDevices {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}
