// Loopback stand-ins for the sites Firecrawl's own v2 e2e tests call
// (docs.firecrawl.dev, firecrawl.dev, github.com, example.com/hook), plus a
// few pages of "the web" for trawl's search index to know (the tests search
// for the capital of France, for firecrawl, for artificial intelligence).
// Each site is its own host: a loopback address of its own (127.0.0.2, …)
// on a free port. Node's http only, no dependencies.
//
//   node site.mjs ADDRS_FILE
//
// writes {"docs": "http://127.0.0.2:PORT", …} to ADDRS_FILE once every site
// listens, then serves until killed. POSTs to the hooks site are counted and
// logged (the crawl test's webhook).
import http from "node:http";
import fs from "node:fs";

const page = ({ title, description, lang = "en", head = "", nav = "", body, footer = "" }) =>
  `<!DOCTYPE html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<title>${title}</title>
<meta name="description" content="${description}">
<meta property="og:title" content="${title}">
<meta property="og:description" content="${description}">
<meta name="viewport" content="width=device-width, initial-scale=1">
${head}
</head>
<body>
<header><nav>${nav}</nav></header>
<main>
${body}
</main>
<footer>${footer}</footer>
</body>
</html>
`;

// A 1×1 PNG, for every image of the sites.
const png = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32"><circle cx="16" cy="16" r="14" fill="#f60"/></svg>`;

// docs.firecrawl.dev: a documentation site with a sitemap, robots.txt,
// <article> content, docs and blog sections.
const docsPages = {
  "/": {
    title: "Firecrawl Docs - Quickstart",
    description: "Firecrawl docs: turn websites into LLM-ready markdown or structured data. Scrape, crawl, map and extract.",
    body: `<article>
<h1>Firecrawl Docs</h1>
<p>Welcome to the Firecrawl docs. Firecrawl turns entire websites into clean, LLM-ready markdown or structured data.
Scrape a single page, crawl a whole site, map its URLs or extract typed data with a schema.</p>
<img src="/images/firecrawl-logo.png" alt="Firecrawl logo">
<h2>Get started</h2>
<ul>
<li><a href="/docs/introduction">Introduction to the docs</a></li>
<li><a href="/docs/scrape">Scrape</a></li>
<li><a href="/docs/crawl">Crawl</a></li>
<li><a href="/docs/map">Map</a></li>
<li><a href="/docs/extract">Extract</a></li>
</ul>
<h2>From the blog</h2>
<ul>
<li><a href="/blog/launch-week">Firecrawl launch week</a></li>
<li><a href="/blog/hello-world">Hello world from Firecrawl</a></li>
</ul>
</article>`,
  },
  "/docs/introduction": {
    title: "Introduction - Firecrawl Docs",
    description: "What Firecrawl is and how the docs are organised.",
    body: `<article><h1>Introduction</h1><p>Firecrawl is an API service that takes a URL, crawls it, and converts it into clean markdown.
These docs describe every endpoint of the API.</p><p>Next: <a href="/docs/scrape">Scrape</a>.</p></article>`,
  },
  "/docs/scrape": {
    title: "Scrape - Firecrawl Docs",
    description: "Scrape one page into markdown, HTML, links and more.",
    body: `<article><h1>Scrape</h1><p>Scrape a single URL and get its content in the formats you ask for: markdown, html, rawHtml, links, screenshot or json.</p>
<p>See also <a href="/docs/crawl">Crawl</a> and <a href="/docs/map">Map</a>.</p></article>`,
  },
  "/docs/crawl": {
    title: "Crawl - Firecrawl Docs",
    description: "Crawl a whole website and get every page.",
    body: `<article><h1>Crawl</h1><p>Crawl a website starting from one URL: every reachable page is scraped, within the limits you set.</p>
<p>See also <a href="/docs/scrape">Scrape</a> and <a href="/docs/extract">Extract</a>.</p></article>`,
  },
  "/docs/map": {
    title: "Map - Firecrawl Docs",
    description: "Get the URLs of a website, fast.",
    body: `<article><h1>Map</h1><p>Map a website: its URLs from its sitemap and its links, ranked by a search term.</p>
<p>See also <a href="/docs/crawl">Crawl</a>.</p></article>`,
  },
  "/docs/extract": {
    title: "Extract - Firecrawl Docs",
    description: "Extract structured data from pages with a schema or a prompt.",
    body: `<article><h1>Extract</h1><p>Extract structured data from one or more URLs with a JSON schema or a prompt.</p>
<p>See also <a href="/docs/scrape">Scrape</a>.</p></article>`,
  },
  "/blog/launch-week": {
    title: "Firecrawl launch week - Firecrawl Blog",
    description: "Everything Firecrawl launched this week: faster crawls, a new map endpoint and the v2 API.",
    head: `<script type="application/ld+json">{"@context":"https://schema.org","@type":"BlogPosting","headline":"Firecrawl launch week","datePublished":"2025-06-02T09:00:00Z","author":{"@type":"Person","name":"The Firecrawl team"}}</script>
<meta property="og:type" content="article">
<meta property="article:published_time" content="2025-06-02T09:00:00Z">`,
    body: `<article><h1>Firecrawl launch week</h1><p>This week Firecrawl launched faster crawls, a new map endpoint and the v2 API of Firecrawl.</p>
<p>Read the <a href="/docs/introduction">docs</a>.</p></article>`,
  },
  "/blog/hello-world": {
    title: "Hello world from Firecrawl - Firecrawl Blog",
    description: "The first post of the Firecrawl blog.",
    head: `<script type="application/ld+json">{"@context":"https://schema.org","@type":"BlogPosting","headline":"Hello world from Firecrawl","datePublished":"2025-01-15T09:00:00Z"}</script>
<meta property="og:type" content="article">`,
    body: `<article><h1>Hello world from Firecrawl</h1><p>This is the first post of the Firecrawl blog, about web scraping for AI.</p>
<p>Back to the <a href="/">docs</a>.</p></article>`,
  },
};
const docsNav = `<a href="/">Docs</a> <a href="/docs/introduction">Introduction</a> <a href="/blog/launch-week">Blog</a>`;

// firecrawl.dev: a landing page with images named after the brand.
const homePages = {
  "/": {
    title: "Firecrawl - The Web Data API for AI",
    description: "Firecrawl turns websites into LLM-ready data. Power your AI apps with clean data crawled from any website.",
    body: `<section>
<img src="/img/firecrawl-logo.svg" alt="Firecrawl">
<h1>Turn websites into LLM-ready data</h1>
<p>Firecrawl is the web data API for AI. Power your AI apps with clean data crawled from any website: scrape, crawl, map, search and extract,
with one API call. Firecrawl handles proxies, JavaScript rendering and rate limits so that you get markdown and structured data.</p>
<p>Start with the <a href="/pricing">pricing</a>, read the <a href="/blog">blog</a>, or see the
<a href="/blog/announcing-v2">announcement of v2</a>.</p>
<img src="/img/hero-firecrawl.png" alt="A crawl in progress">
<img src="/img/logo-customers.png" alt="Customers">
</section>`,
  },
  "/pricing": {
    title: "Pricing - Firecrawl",
    description: "Plans for every scale of web scraping.",
    body: `<section><h1>Pricing</h1><p>Free, Hobby, Standard and Growth plans. Every plan includes scrape, crawl, map, search and extract.</p><p><a href="/">Home</a></p></section>`,
  },
  "/blog": {
    title: "Blog - Firecrawl",
    description: "News and guides from the Firecrawl team.",
    body: `<section><h1>Blog</h1><ul><li><a href="/blog/announcing-v2">Announcing Firecrawl v2</a></li></ul></section>`,
  },
  "/blog/announcing-v2": {
    title: "Announcing Firecrawl v2",
    description: "Firecrawl v2 is here: faster scraping, smarter crawling and a new search endpoint.",
    head: `<script type="application/ld+json">{"@context":"https://schema.org","@type":"NewsArticle","headline":"Announcing Firecrawl v2","datePublished":"2025-08-19T12:00:00Z"}</script>
<meta property="og:type" content="article">`,
    body: `<article><h1>Announcing Firecrawl v2</h1><p>Firecrawl v2 is here: faster scraping, smarter crawling, and a new search endpoint for AI agents.</p></article>`,
  },
};
const homeNav = `<a href="/">Firecrawl</a> <a href="/pricing">Pricing</a> <a href="/blog">Blog</a>`;

// github.com: a page with links and images of several kinds.
const githubPages = {
  "/": {
    title: "GitHub: Let's build from here",
    description: "GitHub is where over 100 million developers shape the future of software, together.",
    body: `<section>
<img src="/images/modules/site/home/logo.png" alt="GitHub">
<h1>Let's build from here</h1>
<p>The world's leading AI-powered developer platform. Host and review code, manage projects, and build software alongside millions of developers.</p>
<p><a href="/features">Features</a> · <a href="/enterprise">Enterprise</a> · <a href="/pricing">Pricing</a> · <a href="/mona-lisa-octocat.png">The Octocat</a></p>
<picture><source srcset="/images/modules/site/home/globe.webp" type="image/webp"><img src="/images/modules/site/home/globe.jpg" alt="Globe"></picture>
<img src="/images/icons/copilot.svg" alt="Copilot">
<div style="background-image: url('/images/modules/site/home/hero-bg.png')">Hero</div>
</section>`,
  },
  "/features": {
    title: "Features - GitHub",
    description: "The tools you need to build what you want.",
    body: `<section><h1>Features</h1><p>Actions, Packages, Security, Codespaces, Copilot, Code review, Issues, Discussions.</p><p><a href="/">Home</a></p></section>`,
  },
  "/enterprise": {
    title: "Enterprise - GitHub",
    description: "The AI-powered developer platform for enterprises.",
    body: `<section><h1>Enterprise</h1><p>Build and ship software on one platform.</p><p><a href="/">Home</a></p></section>`,
  },
  "/pricing": {
    title: "Pricing - GitHub",
    description: "Plans for every developer.",
    body: `<section><h1>Pricing</h1><p>Free, Team and Enterprise.</p><p><a href="/">Home</a></p></section>`,
  },
};

// "The web" the search tests ask about: an encyclopedia's pages, which the
// runner puts in trawl's index (trawl index crawl) before the tests run.
const wikiPages = {
  "/": {
    title: "Encyclopedia - the free encyclopedia",
    description: "Articles on geography, computing and science.",
    body: `<section><h1>Encyclopedia</h1><ul>
<li><a href="/wiki/Paris">Paris</a></li>
<li><a href="/wiki/France">France</a></li>
<li><a href="/wiki/Artificial_intelligence">Artificial intelligence</a></li>
<li><a href="/wiki/Python_(programming_language)">Python (programming language)</a></li>
<li><a href="/wiki/Software_testing">Software testing</a></li>
</ul></section>`,
  },
  "/wiki/Paris": {
    title: "Paris - the capital of France - Encyclopedia",
    description: "Paris is the capital and largest city of France.",
    body: `<article><h1>Paris</h1><p>Paris is the capital and largest city of France. With an estimated population of two million residents,
Paris is the centre of the Île-de-France region. The capital of France has been Paris since the 10th century.</p>
<p>See <a href="/wiki/France">France</a>.</p></article>`,
  },
  "/wiki/France": {
    title: "France - Encyclopedia",
    description: "France is a country in Western Europe; its capital is Paris.",
    body: `<article><h1>France</h1><p>France is a country in Western Europe. Its capital and largest city is <a href="/wiki/Paris">Paris</a>.</p></article>`,
  },
  "/wiki/Artificial_intelligence": {
    title: "Artificial intelligence - Encyclopedia",
    description: "Artificial intelligence (AI) is the capability of computational systems to perform tasks associated with human intelligence, such as learning.",
    body: `<article><h1>Artificial intelligence</h1><p>Artificial intelligence (AI) is the capability of computational systems to perform tasks
typically associated with human intelligence, such as learning, reasoning, problem-solving and perception. Machine learning is a field of AI.</p></article>`,
  },
  "/wiki/Python_(programming_language)": {
    title: "Python (programming language) - Encyclopedia",
    description: "Python is a high-level, general-purpose programming language.",
    body: `<article><h1>Python (programming language)</h1><p>Python is a high-level, general-purpose programming language. Its design philosophy
emphasizes code readability. Python programming is taught in many schools.</p></article>`,
  },
  "/wiki/Software_testing": {
    title: "Software testing - Encyclopedia",
    description: "Software testing is the act of checking whether software satisfies expectations; a test query checks a search engine.",
    body: `<article><h1>Software testing</h1><p>Software testing is the act of checking whether software satisfies expectations. A test query
is a search made to check a search engine.</p></article>`,
  },
};

const sites = {
  docs: { host: "127.0.0.2", pages: docsPages, nav: docsNav, footer: "© Firecrawl docs" },
  home: { host: "127.0.0.3", pages: homePages, nav: homeNav, footer: "© Firecrawl" },
  github: { host: "127.0.0.4", pages: githubPages, nav: `<a href="/">GitHub</a>`, footer: "© GitHub" },
  wiki: { host: "127.0.0.5", pages: wikiPages, nav: `<a href="/">Encyclopedia</a>`, footer: "Text is available under a licence." },
  hooks: { host: "127.0.0.6", pages: {}, nav: "", footer: "" },
};

let hooks = 0;

// Every answer of a site waits this long first, as a site across the
// internet would (SITE_LATENCY_MS, default 300): one test starts a crawl of
// five pages and expects it still running 300 ms later.
const latency = Number(process.env.SITE_LATENCY_MS ?? 300);

function serve(name, site, origin) {
  const handle = answer(name, site, origin);
  return (req, res) => (name === "hooks" || !latency ? handle(req, res) : setTimeout(() => handle(req, res), latency));
}

function answer(name, site, origin) {
  return (req, res) => {
    const path = new URL(req.url, origin).pathname;
    if (name === "hooks") {
      let n = 0;
      req.on("data", (c) => (n += c.length));
      req.on("end", () => {
        hooks++;
        console.log(`hooks: ${req.method} ${path} ${n} bytes (${req.headers["x-svc-event"] || "-"})`);
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(`{"ok":true,"received":${hooks}}`);
      });
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405);
      return res.end();
    }
    if (path === "/robots.txt") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      return res.end(`User-agent: *\nAllow: /\n\nSitemap: ${origin}/sitemap.xml\n`);
    }
    if (path === "/sitemap.xml") {
      const urls = Object.keys(site.pages)
        .map((p) => `  <url><loc>${origin}${p === "/" ? "/" : p}</loc><lastmod>2025-06-01</lastmod></url>`)
        .join("\n");
      res.writeHead(200, { "Content-Type": "application/xml" });
      return res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n${urls}\n</urlset>\n`);
    }
    if (/\.(png|jpg|webp)$/.test(path)) {
      const type = path.endsWith(".png") ? "image/png" : path.endsWith(".jpg") ? "image/jpeg" : "image/webp";
      res.writeHead(200, { "Content-Type": type, "Content-Length": png.length });
      return res.end(req.method === "HEAD" ? undefined : png);
    }
    if (path.endsWith(".svg")) {
      res.writeHead(200, { "Content-Type": "image/svg+xml" });
      return res.end(svg);
    }
    const p = site.pages[path] || site.pages[path.replace(/\/$/, "")];
    if (!p) {
      res.writeHead(404, { "Content-Type": "text/html; charset=utf-8" });
      return res.end(page({ title: "Not found", description: "No such page.", body: "<h1>Not found</h1>" }));
    }
    const html = page({ ...p, nav: site.nav, footer: site.footer });
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Length": Buffer.byteLength(html) });
    res.end(req.method === "HEAD" ? undefined : html);
  };
}

const out = process.argv[2];
if (!out) {
  console.error("usage: node site.mjs ADDRS_FILE");
  process.exit(2);
}
const addrs = {};
await Promise.all(
  Object.entries(sites).map(
    ([name, site]) =>
      new Promise((resolve, reject) => {
        const srv = http.createServer();
        srv.on("error", reject);
        srv.listen(0, site.host, () => {
          const origin = `http://${site.host}:${srv.address().port}`;
          srv.on("request", serve(name, site, origin));
          addrs[name] = origin;
          resolve();
        });
      }),
  ),
);
fs.writeFileSync(out + ".tmp", JSON.stringify(addrs, null, 2));
fs.renameSync(out + ".tmp", out);
console.log("sites:", JSON.stringify(addrs));
