package search

import (
	"slices"
	"testing"
)

// A table of contents names what other pages define: its lines are not
// definitions of the page; a definition term and an API entry are, and
// code comments are not headings. Indexed again from its stored fields
// (the anchor-text refresh), the page keeps the same definitions.
func TestDefinitionsNotFromNavigation(t *testing.T) {
	d := md("http://d/usage/index.html", "Using Sphinx", "# Using Sphinx\n\n"+
		"- [`XMLBuilder`](http://d/builders/index.html#sphinx.builders.xml.XMLBuilder)\n"+
		"- [Builders](http://d/builders/index.html)\n\n"+
		"class sphinx.builders.text.TextBuilder[\\[source\\]](http://d/_modules/x.html)\n\n"+
		"c\\_extra\\_keywords\n\nA list of identifiers.\n\n"+
		"```python\n# conf.py settings\nextensions = []\n```\n")
	d.Prepare()
	got := definitions(d)
	for _, want := range []string{"sphinx.builders.text.textbuilder", "textbuilder", "c_extra_keywords", "using+sphinx"} {
		if !slices.Contains(got, want) {
			t.Errorf("definitions %q lack %q", got, want)
		}
	}
	for _, not := range []string{"xmlbuilder", "builders", "conf.py+settings"} {
		if slices.Contains(got, not) {
			t.Errorf("definitions %q hold %q", got, not)
		}
	}
	if slices.Contains(d.Headings, "conf.py settings") {
		t.Errorf("a code comment read as a heading: %q", d.Headings)
	}

	ix, err := Open("", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Add(d); err != nil {
		t.Fatal(err)
	}
	olds, err := ix.loadAll([]string{d.URL})
	if err != nil || len(olds) != 1 {
		t.Fatal(olds, err)
	}
	if again := olds[0].fields()["defs"]; again != d.prepared["defs"] {
		t.Errorf("indexed again: defs %q, first %q", again, d.prepared["defs"])
	}
}
