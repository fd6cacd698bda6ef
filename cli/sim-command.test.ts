import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { after, describe, test } from "node:test";
import { postJson } from "../sim/test-helpers.ts";

const ENTRY = new URL("./fixtures/run-sim-command.ts", import.meta.url).pathname;
const SCRIPT = new URL("../sim/fixtures/two-step.json", import.meta.url).pathname;
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
});

function start(args: string[]): { child: ChildProcess; url: Promise<string> } {
  const child = spawn(process.execPath, ["--import", "tsx", ENTRY, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  const url = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (data: Buffer) => {
      out += data.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code} before listening: ${out}`)));
  });
  return { child, url };
}

describe("rlgate sim (command line)", () => {
  test("--help describes the sim and its knobs", () => {
    const help = spawnSync(process.execPath, ["--import", "tsx", ENTRY, "--help"], { encoding: "utf8" });
    assert.equal(help.status, 0);
    for (const flag of [
      "--port",
      "--host",
      "--model",
      "--seed",
      "--script",
      "--ttft-ms",
      "--inter-token-ms",
      "--error-rate",
      "--reset-rate",
      "--logprob-noise",
      "--reasoning-field",
    ]) {
      assert.ok(help.stdout.includes(flag), flag);
    }
    assert.match(help.stdout, /simulated vLLM/);
    assert.match(help.stdout, /x-sim-fault/);
  });

  test("--reasoning-field takes reasoning or reasoning_content and refuses anything else, naming both", () => {
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", ENTRY, "--port", "0", "--reasoning-field", "thinking"],
      {
        encoding: "utf8",
      },
    );
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /--reasoning-field: expected reasoning or reasoning_content, got thinking/);
  });

  test("serves with the given options, prints its URL, and exits cleanly on SIGTERM", async () => {
    const { child, url } = start(["--port", "0", "--model", "cli/model", "--seed", "5", "--script", SCRIPT]);
    const base = await url;
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
    assert.equal(models.data[0]!.id, "cli/model");
    const res = await postJson(`${base}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
    assert.equal(res.body["choices"][0]["message"]["reasoning"], "\nI will look at the directory first.\n");
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const [code] = await exited;
    assert.equal(code, 0);
  });

  test("--tool-call-parser qwen3_coder answers as vLLM serving Qwen3-Coder: XML calls, typed arguments, no thinking", async () => {
    const { child, url } = start(["--port", "0", "--tool-call-parser", "qwen3_coder"]);
    const base = await url;
    const tools = [
      {
        type: "function",
        function: {
          name: "run_shell_command",
          parameters: {
            type: "object",
            properties: { command: { type: "string" }, timeout: { type: "integer" } },
            required: ["command", "timeout"],
          },
        },
      },
    ];
    const res = await postJson(`${base}/v1/chat/completions`, {
      messages: [{ role: "user", content: "list files" }],
      tools,
    });
    const message = res.body["choices"][0]["message"];
    assert.equal(message["reasoning"], null);
    assert.equal(message["tool_calls"][0]["function"]["name"], "run_shell_command");
    const args = JSON.parse(message["tool_calls"][0]["function"]["arguments"]) as Record<string, unknown>;
    assert.equal(typeof args["timeout"], "number");
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    await exited;
    const bad = spawnSync(process.execPath, ["--import", "tsx", ENTRY, "--tool-call-parser", "pythonic"], {
      encoding: "utf8",
    });
    assert.notEqual(bad.status, 0);
    assert.match(
      bad.stderr,
      /--tool-call-parser: expected hermes, qwen3_coder, llama3_json, deepseek_v31, openai; got pythonic/,
    );
  });

  test("rejects a bad knob value", () => {
    const bad = spawnSync(process.execPath, ["--import", "tsx", ENTRY, "--error-rate", "2"], { encoding: "utf8" });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /probability/);
  });
});
