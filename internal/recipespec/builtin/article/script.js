// article: structured data (JSON-LD, microdata, meta) through the extract
// service's extractor, the text from the page's main content.
function run(input) {
  const page = fetch(input.url);
  if (page.status >= 400) fail("the page answered HTTP " + page.status);
  const data = extract(page, {
    type: "object",
    properties: {
      headline: { type: "string" },
      author: { type: "string" },
      date_published: { type: "string", format: "date" },
    },
  });
  const main = content(page);
  return [{
    headline: data.headline || main.title || null,
    author: data.author || null,
    date: data.date_published || null,
    text: main.markdown || null,
  }];
}
