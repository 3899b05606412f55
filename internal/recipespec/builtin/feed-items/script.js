// feed-items: RSS 2.0 <item>s or Atom <entry>s. XML pages are read as
// trees with lower-case local names, so "creator" is dc:creator.
function first(of, css) {
  const m = select(of, css);
  return m.length > 0 ? m[0] : null;
}
function text(of, css) {
  const m = first(of, css);
  return m && m.text !== "" ? m.text : null;
}
function run(input) {
  const feed = fetch(input.url);
  if (feed.status >= 400) fail("the feed answered HTTP " + feed.status);
  const rows = [];
  let items = select(feed, "item");
  for (const it of items) {
    rows.push({
      title: text(it, "title"),
      link: text(it, "link") || text(it, "guid"),
      published: text(it, "pubdate") || text(it, "date"),
      author: text(it, "creator") || text(it, "author"),
      summary: text(it, "description"),
    });
  }
  if (items.length === 0) {
    for (const e of select(feed, "entry")) {
      let link = null;
      for (const l of select(e, "link")) {
        const rel = l.attrs.rel || "alternate";
        if (rel === "alternate" && l.attrs.href) { link = resolve(feed.url, l.attrs.href); break; }
      }
      rows.push({
        title: text(e, "title"),
        link: link,
        published: text(e, "published") || text(e, "updated"),
        author: text(e, "author > name"),
        summary: text(e, "summary") || text(e, "content"),
      });
    }
  }
  if (rows.length === 0) log("no item or entry found: is " + feed.url + " a feed?");
  return rows.slice(0, Math.max(0, input.limit));
}
