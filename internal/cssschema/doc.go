// Package cssschema is the json_css schema language (Crawl4AI's
// JsonCssExtractionStrategy): a compiler that checks a schema and names
// the offending field, and its application to a parsed page. The crawl
// server's json_css extraction (cell/crawl/extract), the recipes'
// declarative kind (cell/recipe) and the recipe manifest's checks
// (internal/recipespec) all use it.
//
// A schema is {"name", "baseSelector", "fields": [...], "baseFields":
// [...]}; a field has "name", "type" (text, attribute, html, regex,
// nested, list, nested_list), an optional "selector" (none: the element
// itself), "default" (null is no default) and "transform" (lowercase,
// uppercase, strip). docs/crawl-server.md describes the language.
//
//   - compile.go: Compile and CompileFields, and the bounds on a schema.
//   - apply.go: a compiled schema's items on a page, and the JSON they
//     are written as (keys in schema order, HTML not escaped).
//
// A compiled Schema or Fields is immutable and safe for concurrent use.
package cssschema
