// Package extract implements the extraction strategies of the self-hosted
// crawl server: what a crawl request's extraction_config
// ({"type": ..., "params": {...}}) turns a rendered page into. The result is
// the text of the crawl result's extracted_content: a string holding JSON,
// which Crawl4AI clients read with json.loads.
//
// New validates a config once, when the request is submitted; every error
// it returns satisfies IsBadParams (the server answers 400), names the
// offending field ("params.schema.fields[1].selector: invalid CSS selector
// ..."), and for an llm provider without a key names the variable to set.
// Unknown params keys are ignored, since Crawl4AI clients send options this
// server does not implement. A Strategy is immutable and safe for concurrent
// use; Extract honours its context.
//
// The text strategies (basic, cosine, llm) read Page.Markdown, or, when it is
// empty, the Markdown of the page's main content (cell/content), or else the
// page's plain text.
//
// # basic
//
// No params. Output: the Markdown cut into paragraphs at blank lines, as
// Crawl4AI's default RegexChunking does, with two changes: a fenced code
// block is never split, and a paragraph made only of headings is joined to
// the one after it.
//
//	[{"index": 0, "tags": [], "content": "## Title\n\nFirst paragraph..."}, ...]
//
// # json_css
//
// Params: {"schema": {"name", "baseSelector", "fields": [...], "baseFields":
// [...]}}, as Crawl4AI's JsonCssExtractionStrategy (the language is
// internal/cssschema's, shared with the recipes). A field has "name",
// "type", an optional "selector" (none: the element itself), an optional
// "default" (any JSON value, used when nothing is found; null, like
// Crawl4AI's None, means no default) and an optional "transform"
// (lowercase, uppercase, strip). Types:
//
//   - text: the text of the first match, whitespace collapsed, with a space
//     between block elements.
//   - attribute: the value of the attribute named by "attribute".
//   - html: the outer HTML of the first match.
//   - regex: the first match of "pattern" (RE2 syntax, not Python's) in the
//     text: its first group if it has groups, else the whole match.
//   - nested: an object made from "fields" on the first match ({} if none).
//   - list, nested_list: an array with an object per match, made from
//     "fields" (sub-fields may be of any type in both). A list without
//     "fields" is an array of the matches' texts.
//
// "computed" fields (Python expressions) are refused. Output: an array with
// an object per baseSelector match, keys in schema order; a field with no
// value and no default is left out, and an element that yields no key at
// all is skipped, as in Crawl4AI.
//
//	[{"name": "Ridge Tent", "price": "199.00", "features": ["Waterproof"]}, ...]
//
// # cosine
//
// Params: semantic_filter (string), word_count_threshold (integer, default
// 10), max_dist (number, default 0.2), top_k (integer, default 3),
// linkage_method (single, complete, average, weighted or ward; default
// average), sim_threshold (number, default 0.05).
//
// Crawl4AI embeds paragraphs with a sentence model; this server downloads
// no model and uses TF-IDF instead (lower-cased words, English stop words
// dropped, plurals folded, sublinear tf, smoothed idf, L2 norm). The steps:
// the Markdown is cut into paragraphs as for basic; paragraphs under
// word_count_threshold words are dropped; with a semantic_filter, a
// paragraph is kept only if it shares a term with the filter and its
// cosine similarity to it is at least sim_threshold; at most
// MaxCosineBlocks paragraphs (the most similar ones) are clustered, by
// agglomerative clustering on cosine distance cut at max_dist (the meaning
// of scipy's fcluster(..., criterion="distance")); clusters are ranked by
// the similarity of their centre to the filter, or without a filter by
// their word count, and the first top_k are returned, each with its
// paragraphs in page order and its five heaviest terms as tags.
//
//	[{"index": 0, "tags": ["planets", "stars", ...], "content": "para\n\npara"}, ...]
//
// TF-IDF distances run higher than embedding distances: paragraphs that
// share no word are at 1, paragraphs on one topic typically at 0.85 to
// 0.97. With the default max_dist of 0.2 almost every paragraph is its own
// cluster, and the output is the top_k paragraphs closest to the filter; a
// max_dist near 0.95 groups the paragraphs of a topic. The output is a pure
// function of the page and the params.
//
// # llm
//
// Params: provider ("<vendor>/<model>", required), instruction (string),
// schema (JSON schema object of one item, optional), api_token (optional,
// as in Crawl4AI's examples; the server's <VENDOR>_API_KEY is the
// recommended way). base_url is refused: the server only calls endpoints
// its operator configured.
//
// The calls go through the OpenAI-compatible client of package
// cell/llm. The vendor's variables are named from it upper-cased, with
// anything but letters and digits as "_": the key is <VENDOR>_API_KEY
// (ollama needs none); the base URL is Config.BaseURLs[vendor], else
// <VENDOR>_BASE_URL, else llm.DefaultBaseURLs. The page Markdown is cut into
// chunks of Config.LLMChunkChars (at most Config.LLMMaxChunks; the rest of
// a longer page is not sent), and each chunk is one POST
// {base}/chat/completions with temperature 0, a system prompt asking for
// {"items": [...]}, the instruction, the schema and the chunk, and
// response_format json_schema (with a schema; on a 400 answer it falls back
// to json_object, which more servers know) or json_object. Chunks run
// Config.LLMConcurrency at a time. The answer's JSON is taken from the
// whole content, else from a ``` fence; an array, or an object's "items"
// array, are the chunk's items. Output: the items of all chunks in page
// order.
//
//	[{"name": "Ridge Tent", "price": 199}, ...]
//
// A 429 or 5xx answer, or no answer, is retried Config.LLMRetries times,
// after the Retry-After the provider asks for (up to a minute) or an
// exponential backoff from a second. Any other non-2xx answer fails the
// extraction with an *llm.ProviderError carrying the status and the provider's
// message; the API key never appears in errors.
package extract
