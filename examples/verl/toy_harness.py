#!/usr/bin/env python3
"""A small agent harness (stdlib only): chat completions against OPENAI_BASE_URL with one tool, run_shell_command,
executed in the working directory, until the model answers without a tool call (at most 8 turns).

The prompt: argv[1], else stdin. Model: OPENAI_MODEL, else the first of GET /models. It knows nothing of rlgate: pointed at a rollout's base URL
(rlgate_client.verl_agent_loop.run_harness does that), its calls are captured as they are.
"""
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell_command",
            "description": "Run a shell command in the working directory; returns its exit code and output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def request(path, body=None):
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "unused"),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as res:
            return json.loads(res.read())
    except urllib.error.HTTPError as e:
        sys.exit("%s: HTTP %d %s" % (path, e.code, e.read().decode("utf-8", "replace")[:2000]))


def chat(model, messages):
    return request("/chat/completions", {"model": model, "messages": messages, "tools": TOOLS})["choices"][0]["message"]


def run_tool(call):
    args = json.loads(call["function"].get("arguments") or "{}")
    if call["function"]["name"] != "run_shell_command" or "command" not in args:
        return "error: unknown tool or missing command"
    done = subprocess.run(args["command"], shell=True, capture_output=True, text=True, timeout=60)
    return "Exit Code: %d\n%s%s" % (done.returncode, done.stdout, done.stderr)


def main():
    prompt = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    messages = [
        {"role": "system", "content": "You are a careful assistant with a shell."},
        {"role": "user", "content": prompt},
    ]
    # OPENAI_MODEL, else the first model the server lists (as vLLM serves one).
    model = os.environ.get("OPENAI_MODEL") or request("/models")["data"][0]["id"]
    for _ in range(8):
        message = chat(model, messages)
        calls = message.get("tool_calls") or []
        turn = {"role": "assistant", "content": message.get("content") or ""}
        # Reasoning goes back under the name it came in: `reasoning` from vLLM >= 0.17, `reasoning_content` before.
        for key in ("reasoning", "reasoning_content"):
            if message.get(key):
                turn[key] = message[key]
        if calls:
            turn["tool_calls"] = calls
        messages.append(turn)
        if not calls:
            print(message.get("content") or "")
            return 0
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
    print("no answer after 8 turns", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
