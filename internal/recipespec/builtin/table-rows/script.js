// table-rows: one table of a page, its rows as {header: value} objects.
function run(input) {
  const page = fetch(input.url);
  if (page.status >= 400) fail("the page answered HTTP " + page.status);
  const tables = select(page, "table");
  if (tables.length === 0) { log("the page has no table"); return []; }
  let table = null;
  if (input.caption) {
    const want = input.caption.toLowerCase();
    for (const t of tables) {
      const cap = select(t, "caption");
      if (cap.length > 0 && cap[0].text.toLowerCase().indexOf(want) >= 0) { table = t; break; }
    }
    if (!table) { log("no table's caption has \"" + input.caption + "\""); return []; }
  } else {
    if (input.index < 0 || input.index >= tables.length) {
      log("the page has " + tables.length + " tables; index " + input.index + " is not one");
      return [];
    }
    table = tables[input.index];
  }
  const trs = select(table, "tr");
  let header = [];
  let start = 0;
  if (trs.length > 0) {
    const ths = select(trs[0], "th");
    const cells = select(trs[0], "th, td");
    if (ths.length > 0 && ths.length === cells.length) {
      header = cells.map(function (c) { return c.text; });
      start = 1;
    }
  }
  const rows = [];
  for (let i = start; i < trs.length; i++) {
    const cells = select(trs[i], "th, td");
    if (cells.length === 0) continue;
    const obj = {};
    cells.forEach(function (c, j) {
      const key = j < header.length && header[j] !== "" ? header[j] : "column_" + (j + 1);
      obj[key] = c.text;
    });
    rows.push({ row: rows.length, cells: obj });
  }
  return rows;
}
