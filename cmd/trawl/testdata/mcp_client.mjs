// Drives trawl's tool server with the official TypeScript MCP client
// (npm @modelcontextprotocol/sdk), for cmd/trawl's TestMCPClients*.
// Input on stdin, one JSON object:
//   {"clients": DIR, "mode": "http"|"stdio", "url": GATE/mcp, "key": KEY,
//    "command": [trawl, "mcp", ...] (stdio), "list": true,
//    "calls": [{"name": TOOL, "args": {...}, "progress": true}]}
// Output on stdout, one JSON object: {"tools": [{name, description,
// inputSchema}], "results": [{name, result, progress: [messages]}]}.
// The checks are the Go test's.
import { createRequire } from "node:module";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const require = createRequire(plan.clients + "/node_modules/");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

let transport;
if (plan.mode === "stdio") {
  transport = new StdioClientTransport({ command: plan.command[0], args: plan.command.slice(1), stderr: "inherit" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(plan.url), {
    requestInit: { headers: { Authorization: "Bearer " + plan.key } },
  });
}
const client = new Client({ name: "trawl-test", version: "1.0.0" });
await client.connect(transport);

const out = { server: client.getServerVersion(), tools: [], results: [] };
if (plan.list) {
  const { tools } = await client.listTools();
  out.tools = tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema }));
}
for (const call of plan.calls || []) {
  const progress = [];
  const opts = { timeout: 130000, resetTimeoutOnProgress: true };
  if (call.progress) opts.onprogress = (p) => progress.push(p.message || String(p.progress));
  try {
    const result = await client.callTool({ name: call.name, arguments: call.args || {} }, undefined, opts);
    out.results.push({ name: call.name, result, progress });
  } catch (e) {
    out.results.push({ name: call.name, thrown: String(e && e.message ? e.message : e), progress });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out));
