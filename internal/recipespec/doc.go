// Package recipespec is the recipe manifest format (docs/recipes.md,
// docs/spec/hosted-api.md §2.7): what a recipe directory holds and the
// checks a recipe passes before anything runs it. The cells' recipe
// service (cell/recipe) loads recipes with it, and the gate checks an
// operator's recipe with it before the ledger keeps one (a manifest a
// cell would not load is refused there).
//
//   - manifest.go: the manifest's types, the kinds, input types, file
//     names and bounds.
//   - parse.go: Parse, the checks and defaults in named steps, and the
//     compiled json_css schemas of a json recipe (internal/cssschema).
//   - inputs.go: Coerce, an input value read as its declared type.
//   - builtin.go: the built-in recipes shipped in the binary (builtin/).
package recipespec
