// A worker's side of the primary's connection messages: each handed connection is confirmed before the gateway gets
// it; once the worker is closing, each is declined unread.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { Socket } from "node:net";
import { test } from "node:test";
import type { WorkerMessage } from "./messages.ts";
import { WorkerLink, type PrimaryChannel } from "./worker-link.ts";

function fakeChannel(): PrimaryChannel & { sent: WorkerMessage[]; deliver(message: unknown, handle?: unknown): void } {
  const events = new EventEmitter();
  const sent: WorkerMessage[] = [];
  return {
    connected: true,
    sent,
    send: (message) => sent.push(message),
    on: (event, listener) => events.on(event, listener),
    off: (event, listener) => events.off(event, listener),
    deliver: (message, handle) => events.emit("message", message, handle),
  };
}

test("a handed connection is confirmed to the primary before the gateway gets it; a message without one is ignored", () => {
  const channel = fakeChannel();
  const link = new WorkerLink(0, channel);
  const served: Socket[] = [];
  link.serveConnections((socket) => {
    assert.deepEqual(channel.sent.at(-1), { type: "rlgate:took", id: 7 });
    served.push(socket);
  });
  const socket = new Socket();
  channel.deliver({ type: "rlgate:connection", id: 7 }, socket);
  channel.deliver({ type: "rlgate:connection", id: 8 }); // the handle did not arrive
  assert.deepEqual(served, [socket]);
  assert.deepEqual(channel.sent, [{ type: "rlgate:took", id: 7 }]);
  socket.destroy();
});

test("a closing worker declines a handed connection: its copy closed, the gateway never gets it", () => {
  const channel = fakeChannel();
  const link = new WorkerLink(0, channel);
  const served: Socket[] = [];
  link.serveConnections((socket) => served.push(socket));
  link.close();
  const socket = new Socket();
  channel.deliver({ type: "rlgate:connection", id: 3 }, socket);
  assert.deepEqual(served, []);
  assert.ok(socket.destroyed);
  assert.deepEqual(channel.sent, [{ type: "rlgate:closing" }, { type: "rlgate:declined", id: 3 }]);
});
