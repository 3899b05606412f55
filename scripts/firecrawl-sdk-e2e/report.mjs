// Prints jest's JSON report (--json --outputFile) as tables: one line per
// test (file, name, status, time, the first line of its failure), then the
// counts per test file.
//
//   node report.mjs RESULTS_JSON [ROOT]
import fs from "node:fs";
import path from "node:path";

const [file, root = ""] = process.argv.slice(2);
const r = JSON.parse(fs.readFileSync(file, "utf8"));

const rows = [];
const perFile = new Map();
const suites = [...r.testResults].sort((a, b) => a.name.localeCompare(b.name));
for (const suite of suites) {
  const name = path.basename(suite.name);
  const counts = perFile.get(name) || { passed: 0, failed: 0, skipped: 0 };
  perFile.set(name, counts);
  if (suite.assertionResults.length === 0 && suite.status === "failed") {
    // The file did not run (it did not compile, or beforeAll threw).
    rows.push([name, "(file)", "failed", "", firstLine(suite.message)]);
    counts.failed++;
    continue;
  }
  for (const t of suite.assertionResults) {
    const status = t.status === "passed" ? "passed" : t.status === "failed" ? "failed" : "skipped";
    counts[status]++;
    const why = status === "failed" ? firstLine((t.failureMessages || []).join("\n")) : "";
    const ms = t.duration != null ? `${(t.duration / 1000).toFixed(1)}s` : "";
    rows.push([name, t.fullName.replace(/^v2\.\w+ e2e /, ""), status, ms, why]);
  }
}

function firstLine(s) {
  // eslint-disable-next-line no-control-regex
  const clean = (s || "").replace(/\u001b\[[0-9;]*m/g, "");
  const lines = clean.split("\n").map((l) => l.trim()).filter(Boolean);
  // jest's expect messages: "expect(received).toBe(expected)" then the values.
  if (lines[0] && lines[0].startsWith("Error: expect(")) {
    return lines.slice(0, 4).join(" ").slice(0, 200);
  }
  return (lines[0] || "").slice(0, 200);
}

function table(header, body) {
  const w = header.map((h, i) => Math.max(h.length, ...body.map((row) => String(row[i]).length)));
  const line = (row) => row.map((c, i) => String(c).padEnd(w[i])).join("  ").trimEnd();
  console.log(line(header));
  console.log(line(w.map((n) => "-".repeat(n))));
  for (const row of body) console.log(line(row));
}

table(["file", "test", "status", "time", "failure"], rows);
console.log("");
const totals = { passed: 0, failed: 0, skipped: 0 };
const fileRows = [...perFile.entries()]
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([name, c]) => {
    totals.passed += c.passed;
    totals.failed += c.failed;
    totals.skipped += c.skipped;
    return [name, c.passed, c.failed, c.skipped];
  });
fileRows.push(["total", totals.passed, totals.failed, totals.skipped]);
table(["file", "passed", "failed", "skipped"], fileRows);
if (root) console.log(`\nfull report: ${file}`);
