// Package extract fills a JSON Schema from a page (POST /extract,
// docs/spec/hosted-api.md §2.4a; monitors' custom fields and the recipes'
// extract use it too). A Request is checked into a Plan (the schema,
// given, inferred from an instruction or from an example); an Extractor
// fills it, with the operator's model when one is configured (Model),
// else deterministically: nothing is made up, a property the page does
// not show is null.
//
// The deterministic extractor reads a page's facts (key, value, source)
// once, ranked by how sure each source is, and matches the schema's
// properties to them by name and type. Where the pieces are:
//
//   - extract.go: Request, Plan, Check, Page, Extractor, Deterministic;
//     content kinds (Detect, ToHTML).
//   - schema.go: the compiled schema (Schema, Node); infer.go: schemas
//     from an instruction or an example.
//   - page.go: what a page's reading yields (page, facts, lists) and the
//     order of the readers; the HTML readers themselves are
//     internal/htmlread's (visible text, JSON-LD, tables).
//   - jsonld.go, microdata.go (and RDFa Lite), meta.go (OpenGraph,
//     <meta>, title and heading), tables.go (tables, definition lists,
//     lists under a heading), labels.go ("label: value" lines, bylines),
//     hints.go (class and id names), blocks.go (repeated cards and rows):
//     one source of facts each.
//   - match.go: fact sources and name matching; fill.go: filling the
//     schema from the facts; values.go: typed values read from text.
//   - model.go: the model path (chunked calls through cell/llm, merged).
package extract
