// Drives Firecrawl's official JS SDK (@mendable/firecrawl-js, installed by
// scripts/deps.sh; its directory in FIRECRAWL_JS_DIR) against a trawl gate
// by changing only the base URL and the key. Reads a plan from stdin:
// {apiUrl, apiKey, calls: [{method, args}]}; prints {results: [{method,
// value} | {method, thrown, status, code}]}.
import { pathToFileURL } from "node:url";
import path from "node:path";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const plan = JSON.parse(Buffer.concat(chunks).toString());
const entry = path.join(process.env.FIRECRAWL_JS_DIR, "node_modules", "@mendable", "firecrawl-js", "dist", "index.js");
const { default: Firecrawl } = await import(pathToFileURL(entry).href);
const app = new Firecrawl({ apiKey: plan.apiKey, apiUrl: plan.apiUrl });

const results = [];
for (const call of plan.calls) {
  try {
    const value = await app[call.method](...(call.args ?? []));
    results.push({ method: call.method, value });
  } catch (e) {
    results.push({ method: call.method, thrown: String(e?.message ?? e), status: e?.status ?? null, code: e?.code ?? null });
  }
}
process.stdout.write(JSON.stringify({ results }));
