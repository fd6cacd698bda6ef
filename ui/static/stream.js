// @ts-check
// The gateway's event stream (/api/events) read with fetch, so the token travels in a header: each event's data is
// handed to its handler in camelCase; the stream reconnects on its own after a drop, calling `onReconnect` first
// (the page reloads what it may have missed).
import { camel, headers } from "./api.js";

/**
 * @typedef {object} StreamHandlers
 * @property {(event: string, data: any) => void} onEvent
 * @property {(live: boolean, text?: string) => void} onState
 * @property {() => void} onUnauthorized
 * @property {() => void} onReconnect
 */

const RECONNECT_MS = 2000;

/** @type {AbortController | null} */
let current = null;

/**
 * One server-sent event block ("event: x\ndata: {...}") as [event, data], or null for a comment.
 * @param {string} block
 * @returns {[string, any] | null}
 */
export function parseEventBlock(block) {
  let event = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).trim();
  }
  return data ? [event, camel(JSON.parse(data))] : null;
}

/** @param {StreamHandlers} handlers */
export async function connect(handlers) {
  current?.abort();
  const abort = (current = new AbortController());
  try {
    const res = await fetch("/api/events", { headers: headers(), signal: abort.signal });
    if (res.status === 401) {
      handlers.onState(false, "needs token");
      handlers.onUnauthorized();
      return;
    }
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    handlers.onState(true);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const parsed = parseEventBlock(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (parsed) handlers.onEvent(...parsed);
      }
    }
  } catch {
    if (abort.signal.aborted) return;
  }
  handlers.onState(false);
  setTimeout(handlers.onReconnect, RECONNECT_MS);
}
