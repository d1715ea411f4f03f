// docs/mcp.md's example: an MCP client (the official TypeScript SDK) that starts `envmgr mcp`, runs a
// demo task with the computer tool and prints the score. make test runs it (tests/integration/test_mcp.sh).
//
//   node example.mjs ENVMGR TASK_ROOT
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [envmgr, taskRoot] = process.argv.slice(2);
const client = new Client({ name: "envmgr-example", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: envmgr, args: ["mcp", "--task-root", taskRoot] }));

const { tools } = await client.listTools();
console.log("tools:", tools.map((t) => t.name).join(", "));
const started = await client.callTool({ name: "start_task", arguments: { task: "demo/terminal-mkdir-tree.json" } });
console.log(started.content.find((c) => c.type === "text").text);
// what a model would do after looking at the screenshot in `started`:
await client.callTool({ name: "computer", arguments: { action: "type", text: "mkdir -p ~/projects/envmgr/src" } });
await client.callTool({ name: "computer", arguments: { action: "key", text: "Return" } });
await client.callTool({ name: "act", arguments: { action: "DONE" } });
const result = JSON.parse((await client.callTool({ name: "evaluate", arguments: {} })).content[0].text);
console.log(`score ${result.score.toFixed(1)}`);
await client.close();
