// The official MCP TypeScript SDK client against `od mcp` over stdio (driven by tests/api/mcp.rs).
// Usage: node sdk-check.mjs <od binary> <data dir> <best match for "capital of a country">
// Disclosed mode: initialize, list (two meta-tools), od_list, describe (schema once, then a
// reference), call, approval refusal, unknown tool (a JSON-RPC error), unknown target (isError),
// ping. Flat mode: the catalog as tools, a direct call. Any transport error fails the check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [od, dataDir, capital] = process.argv.slice(2);
const fail = (msg) => {
  console.error(`MCP CHECK FAILED: ${msg}`);
  process.exit(1);
};
const check = (cond, msg) => cond || fail(msg);
const text = (r) => JSON.parse(r.content[0].text);

async function connect(extra) {
  const transport = new StdioClientTransport({ command: od, args: ["mcp", "--data-dir", dataDir, ...extra], stderr: "pipe" });
  let negotiated = null;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    negotiated = v;
    setVersion?.(v);
  };
  const client = new Client({ name: "od-sdk-check", version: "1.0.0" });
  client.onerror = (e) => fail(`transport error: ${e.message}`);
  await client.connect(transport);
  return { client, negotiated: () => negotiated };
}

async function disclosed() {
  const { client, negotiated } = await connect([]);
  check(negotiated() === "2025-11-25", `negotiated ${negotiated()}`);
  check(client.getServerVersion()?.name === "od", "server info names od");
  check(client.getServerCapabilities()?.tools, "tools capability");
  const { tools } = await client.listTools();
  check(JSON.stringify(tools.map((t) => t.name)) === '["od_list","od_call"]', `tools: ${tools.map((t) => t.name)}`);

  const list = await client.callTool({ name: "od_list", arguments: { query: "capital of a country" } });
  check(!list.isError, "od_list ok");
  const page = text(list);
  check(page.tools[0].name === capital, `best match: ${JSON.stringify(page.tools[0])}`);
  check(page.tools.every((t) => !("inputSchema" in t)), "od_list sends no schemas");

  const d1 = text(await client.callTool({ name: "od_call", arguments: { name: "runs.get", describe: true } }));
  check(d1.inputSchema?.required?.[0] === "runId", `describe: ${JSON.stringify(d1)}`);
  const d2 = text(await client.callTool({ name: "od_call", arguments: { name: "runs.get", describe: true } }));
  check(!("inputSchema" in d2) && d2.digest === d1.digest, `second describe is a reference: ${JSON.stringify(d2)}`);

  const called = await client.callTool({ name: "od_call", arguments: { name: "projects.list", args: {} } });
  check(!called.isError && Array.isArray(text(called).projects), `call: ${JSON.stringify(called)}`);
  const refused = await client.callTool({ name: "od_call", arguments: { name: "projects.create", args: { name: "x" } } });
  check(refused.isError && text(refused).error.code === "approval-required", `approval: ${JSON.stringify(refused)}`);
  const nope = await client.callTool({ name: "od_call", arguments: { name: "no.such.tool", args: {} } });
  check(nope.isError && text(nope).error.code === "tool-not-found", "unknown target fails closed");
  let rpcError = null;
  try {
    await client.callTool({ name: "nope", arguments: {} });
  } catch (e) {
    rpcError = e;
  }
  check(rpcError && rpcError.code === -32602, `unknown tool is a JSON-RPC error: ${rpcError}`);
  await client.ping();
  await client.close();
}

async function flat() {
  const { client } = await connect(["--flat"]);
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
    pages += 1;
  } while (cursor);
  check(pages > 1, "a big catalog comes in pages");
  check(tools.some((t) => t.name === "projects.list") && tools.every((t) => t.inputSchema?.type === "object"), "flat catalog");
  const r = await client.callTool({ name: "projects.list", arguments: {} });
  check(!r.isError && Array.isArray(text(r).projects), "flat call");
  await client.close();
  return tools.length;
}

await disclosed();
const n = await flat();
console.log(`MCP CHECK PASSED (flat catalog: ${n} tools)`);
