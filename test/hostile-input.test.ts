// Hostile input never takes the gateway down: each test is named after the defect it keeps fixed.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { startStack, type Stack } from "./helpers.ts";

/** Sends raw bytes on a fresh socket and resolves with everything the gateway answered. */
function rawRequest(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
  });
}

describe("hostile input", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test("defect 1: request targets the URL parser refuses get a JSON 400 and the gateway goes on", async () => {
    for (const target of ["//[", "/\\", "//x:99999/", "//[::1/v1/messages"]) {
      const answer = await rawRequest(stack.gateway.url, `GET ${target} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 400 /, `target ${target}: ${answer.slice(0, 80)}`);
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
      assert.equal(body.error.code, "RLGATE_BAD_REQUEST");
    }
    const health = await fetch(`${stack.gateway.url}/healthz`);
    assert.equal(health.status, 200);
  });
});
