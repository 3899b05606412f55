// Package htmlread holds the small readers of a parsed HTML page that the
// cell's services share (cell/content, cell/extract, cell/recipe,
// cell/monitor and the crawl server's json_css): pure functions over an
// *html.Node, one kind a file, each with its own tests.
//
//   - visibletext.go: the text of an element as a reader sees it, in the
//     three forms the callers want (InnerText, FieldText, VisibleText),
//     all from one walk; Collapse folds white space.
//   - jsonld.go: the page's JSON-LD blocks (a comment or CDATA wrapper
//     removed, invalid JSON skipped) and the entities in them (arrays and
//     @graph flattened).
//   - tables.go: a data table as a grid of cell texts, colspan and
//     rowspan honoured, layout tables refused.
//
// Nothing here modifies the tree, fetches or keeps state.
package htmlread
