// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, from the npm registry) as a client of
// envmgr's MCP server: it lists the tools, takes screenshots, acts, drives a demo task's episode to a
// score and meets the error paths (an unknown tool, bad arguments, a closed env). Written for envmgr.
//
//   node mcp_client_check.mjs stdio ENVMGR TASK_ROOT OUT RUN_DIR
//   node mcp_client_check.mjs http URL TOKEN
//
// Prints "ok   NAME" / "FAIL NAME: why" lines (tests/integration/lib.sh's tally counts them).
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);

function report(name, ok, why = "") {
  console.log(ok ? `ok   ${name}` : `FAIL ${name}: ${why}`);
}

// A PNG's width and height from its IHDR chunk.
function pngSize(b64) {
  const png = Buffer.from(b64, "base64");
  if (png.subarray(1, 4).toString() !== "PNG") return null;
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

function texts(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

function image(result) {
  return result.content.find((c) => c.type === "image");
}

async function check(name, fn) {
  try {
    const [ok, why] = await fn();
    report(name, ok, why);
  } catch (e) {
    report(name, false, `${e.constructor.name}: ${e.message}`);
  }
}

async function main() {
  const client = new Client({ name: "envmgr-test", version: "1.0.0" });
  let transport;
  const [w, h] = mode === "stdio" ? [1024, 640] : [1280, 800]; // the computer tool's display
  if (mode === "stdio") {
    const [envmgr, taskRoot, out] = rest;
    transport = new StdioClientTransport({
      command: envmgr,
      args: ["mcp", "--task-root", taskRoot, "--out", out, "--accel", "tcg", "--display", `${w}x${h}`],
      env: process.env,
      stderr: "inherit",
    });
  } else {
    const [url, token] = rest;
    transport = new StreamableHTTPClientTransport(new URL(url + "/v1/mcp"), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  await client.connect(transport);
  const label = `${mode}:`;
  const server = client.getServerVersion();
  report(`${label} initialize: the server is envmgr (${server?.name} ${server?.version})`, server?.name === "envmgr");

  await check(`${label} tools/list has the env's tools`, async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort().join(",");
    const want = "accessibility_tree,act,computer,evaluate,restore_state,save_state,screenshot,start_task";
    return [names === want && tools.every((t) => t.inputSchema?.type === "object"), names];
  });

  await check(`${label} screenshot: a PNG of the whole screen`, async () => {
    const r = await client.callTool({ name: "screenshot", arguments: {} });
    const img = image(r);
    const size = img && img.mimeType === "image/png" ? pngSize(img.data) : null;
    return [!r.isError && size && size[0] === 1280 && size[1] === 800, JSON.stringify(size)];
  });

  await check(`${label} start_task: the task's instruction and its first screenshot`, async () => {
    const r = await client.callTool({ name: "start_task", arguments: { task: "demo/terminal-mkdir-tree.json" } });
    return [!r.isError && /Instruction: In the open terminal/.test(texts(r)) && image(r), texts(r)];
  });

  await check(`${label} computer screenshot: the screen at the tool's display size (${w}x${h})`, async () => {
    const r = await client.callTool({ name: "computer", arguments: { action: "screenshot" } });
    const size = image(r) ? pngSize(image(r).data) : null;
    return [!r.isError && size && size[0] === w && size[1] === h, JSON.stringify(size)];
  });

  await check(`${label} bad arguments: a tool error naming the field, the episode goes on`, async () => {
    const r = await client.callTool({ name: "computer", arguments: { action: "left_click", coordinate: [w, 1] } });
    return [r.isError === true && /input\.coordinate/.test(texts(r)), texts(r)];
  });

  await check(`${label} an unknown tool: the protocol's error (-32602)`, async () => {
    try {
      const r = await client.callTool({ name: "teleport", arguments: {} });
      return [false, `answered ${JSON.stringify(r).slice(0, 200)}`];
    } catch (e) {
      return [e.code === -32602 && /Unknown tool/.test(e.message), `${e.code} ${e.message}`];
    }
  });

  await check(`${label} computer: type the command and press Return`, async () => {
    const a = await client.callTool({ name: "computer", arguments: { action: "type", text: "mkdir -p ~/projects/envmgr/src" } });
    const b = await client.callTool({ name: "computer", arguments: { action: "key", text: "Return" } });
    return [!a.isError && !b.isError && image(a) && image(b), texts(a) + texts(b)];
  });

  await check(`${label} cursor_position: the pointer in the display's pixels`, async () => {
    await client.callTool({ name: "computer", arguments: { action: "mouse_move", coordinate: [100, 50] } });
    const r = await client.callTool({ name: "computer", arguments: { action: "cursor_position" } });
    return [!r.isError && texts(r) === "X=100,Y=50", texts(r)];
  });

  await check(`${label} act with a computer_13 DONE ends the episode`, async () => {
    const r = await client.callTool({ name: "act", arguments: { action: { action_type: "DONE" } } });
    return [!r.isError && /The episode has ended \(done\)/.test(texts(r)), texts(r)];
  });

  await check(`${label} evaluate: the episode scores 1.0`, async () => {
    const r = await client.callTool({ name: "evaluate", arguments: {} });
    const result = JSON.parse(texts(r));
    return [!r.isError && result.score === 1.0 && result.status === "scored", texts(r).slice(0, 300)];
  });

  await check(`${label} after the episode: computer is a tool error, not a crash`, async () => {
    await client.callTool({ name: "start_task", arguments: { task: "demo/terminal-mkdir-tree.json" } });
    await client.callTool({ name: "act", arguments: { action: "FAIL" } });
    const r = await client.callTool({ name: "computer", arguments: { action: "screenshot" } });
    return [r.isError === true && /episode has ended/.test(texts(r)), texts(r)];
  });

  if (mode === "stdio") {
    const runDir = rest[3];
    await check(`${label} a closed env (its QEMU killed): a tool error saying so`, async () => {
      execFileSync("pkill", ["-9", "-f", `qemu-system-x86_64 -name envmgr-.* ${runDir}/`]);
      await new Promise((res) => setTimeout(res, 1000));
      const r = await client.callTool({ name: "screenshot", arguments: {} });
      return [r.isError === true && /QEMU|gone|dead|died/i.test(texts(r)), texts(r)];
    });
    await check(`${label} ping still answers`, async () => [(await client.ping()) !== undefined, ""]);
  }
  if (mode === "http") {
    await check(`${label} DELETE ends the session (terminateSession)`, async () => {
      await transport.terminateSession();
      return [transport.sessionId === undefined, String(transport.sessionId)];
    });
  }
  await client.close();
}

main().catch((e) => {
  report(`${mode}: the client ran to its end`, false, `${e.constructor.name}: ${e.message}`);
  process.exitCode = 1;
});
