#!/usr/bin/env node
// Baseline for `make bench`: HTML -> main content -> Markdown with the
// usual Node stack (JSDOM -> Readability -> Turndown + GFM plugin).
//
// Usage: node pipeline.js --list FILE --base URL [--root DIR] [--warmup N]
//   --list    file with one HTML path per line (the pages to process)
//   --base    URL the corpus is served under; a page's URL is base + its
//             path relative to --root (so relative links resolve the same
//             way they do for the Go side)
//   --root    corpus directory (default: the directory of the first page)
//   --warmup  pages processed before timing starts (default 100)
//
// Prints one JSON line: {pages, ms_per_page, p50, p99, ...}. Files are read
// into memory before timing: only the pipeline is measured.
'use strict';
const fs = require('fs');
const path = require('path');
const { JSDOM, VirtualConsole } = require('jsdom');
const { Readability } = require('@mozilla/readability');
const TurndownService = require('turndown');
const { gfm } = require('turndown-plugin-gfm');

function args(argv) {
  const o = { warmup: 100 };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    if (i + 1 >= argv.length) throw new Error(`missing value for --${k}`);
    o[k] = argv[i + 1];
  }
  if (!o.list || !o.base) {
    throw new Error('usage: pipeline.js --list FILE --base URL [--root DIR] [--warmup N]');
  }
  o.warmup = parseInt(o.warmup, 10);
  return o;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, i)];
}

// One Turndown service for all pages, as a long-running service would keep.
const td = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced' });
td.use(gfm);
// JSDOM reports CSS it cannot parse on the virtual console; keep it quiet.
const quiet = new VirtualConsole();

function processPage(html, url) {
  const dom = new JSDOM(html, { url, virtualConsole: quiet });
  try {
    const article = new Readability(dom.window.document).parse();
    if (!article || !article.content) return '';
    return td.turndown(article.content);
  } finally {
    dom.window.close();
  }
}

function main() {
  const o = args(process.argv);
  const files = fs.readFileSync(o.list, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);
  if (files.length === 0) throw new Error(`no pages in ${o.list}`);
  const root = o.root || path.dirname(files[0]);
  const base = o.base.endsWith('/') ? o.base : o.base + '/';
  const pages = files.map((f) => ({
    html: fs.readFileSync(f, 'utf8'),
    url: new URL(path.relative(root, f).split(path.sep).join('/'), base).href,
  }));

  // A page that throws (jsdom's CSS parser gives up on some real-world
  // inline styles) counts as an error and yields no Markdown; its time
  // still counts, as the work was done.
  let errors = 0;
  const tryPage = (p) => {
    try {
      return processPage(p.html, p.url);
    } catch (e) {
      errors++;
      return '';
    }
  };
  for (let i = 0; i < Math.min(o.warmup, pages.length); i++) tryPage(pages[i]);
  errors = 0;

  const times = new Array(pages.length);
  let empty = 0;
  let mdBytes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < pages.length; i++) {
    const s = process.hrtime.bigint();
    const md = tryPage(pages[i]);
    times[i] = Number(process.hrtime.bigint() - s) / 1e6;
    if (md.length === 0) empty++;
    mdBytes += md.length;
  }
  const total = Number(process.hrtime.bigint() - t0) / 1e6;
  // user+system CPU of the whole process (GC threads included): less
  // sensitive to a busy machine than wall time.
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  times.sort((a, b) => a - b);
  const r3 = (x) => Math.round(x * 1000) / 1000;
  process.stdout.write(JSON.stringify({
    impl: 'jsdom+readability+turndown-gfm',
    pages: pages.length,
    ms_per_page: r3(total / pages.length),
    cpu_ms_per_page: r3(cpuMs / pages.length),
    p50: r3(percentile(times, 50)),
    p99: r3(percentile(times, 99)),
    empty,
    errors,
    markdown_bytes: mdBytes,
  }) + '\n');
}

try {
  main();
} catch (e) {
  process.stderr.write(`pipeline.js: ${e.stack || e}\n`);
  process.exit(1);
}
