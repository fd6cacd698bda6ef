// The process logger: JSON lines off a terminal, pino-pretty's lines on one (or as RLGATE_LOG_FORMAT says).
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";
import { createLogger, lineLogger } from "./log.ts";

function sink(isTTY: boolean): PassThrough & { isTTY: boolean; text(): string } {
  const stream = new PassThrough() as PassThrough & { isTTY: boolean; text(): string };
  stream.isTTY = isTTY;
  let text = "";
  stream.on("data", (chunk: Buffer) => (text += chunk.toString()));
  stream.text = () => text;
  return stream;
}

describe("createLogger", () => {
  test("not a terminal: one JSON object per line, with level, time, pid, the record's fields and the error's stack", () => {
    const out = sink(false);
    const log = createLogger({ destination: out }).child({ component: "gateway" });
    log.warn({ call: 7, status: "upstream_error" }, "upstream reset mid-stream");
    log.error({ err: new TypeError("boom") }, "internal error answered 500");
    const [warn, error] = out
      .text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      {
        level: warn!.level,
        component: warn!.component,
        call: warn!.call,
        status: warn!.status,
        msg: warn!.msg,
        pid: warn!.pid,
      },
      {
        level: 40,
        component: "gateway",
        call: 7,
        status: "upstream_error",
        msg: "upstream reset mid-stream",
        pid: process.pid,
      },
    );
    assert.equal(typeof warn!.time, "number");
    const err = error!.err as { type: string; message: string; stack: string };
    assert.equal(err.type, "TypeError");
    assert.match(err.stack, /TypeError: boom\n\s+at /);
  });

  test("a terminal: readable lines, not JSON; RLGATE_LOG_FORMAT and the level option override", () => {
    const tty = sink(true);
    createLogger({ destination: tty }).warn({ call: 7 }, "upstream reset mid-stream");
    assert.match(tty.text(), /\x1b\[33mWARN/, "coloured on a terminal");
    const plain = tty.text().replace(/\x1b\[\d+m/g, "");
    assert.match(plain, /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: upstream reset mid-stream\n\s+call: 7\n$/);

    const forced = sink(true);
    createLogger({ destination: forced, format: "json", level: "warn" }).info("dropped below the level");
    assert.equal(forced.text(), "");
    process.env.RLGATE_LOG_FORMAT = "json";
    try {
      const viaEnv = sink(true);
      lineLogger(createLogger({ destination: viaEnv }), "error")("a line from a line logger");
      assert.deepEqual(JSON.parse(viaEnv.text()).msg, "a line from a line logger");
      assert.equal(JSON.parse(viaEnv.text()).level, 50);
    } finally {
      delete process.env.RLGATE_LOG_FORMAT;
    }
  });
});
