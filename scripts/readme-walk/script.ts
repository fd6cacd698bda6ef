// The walk as one bash script: the pages' shell blocks verbatim, in order, in one shell (a variable or function a
// block defines is there for the next, as in a reader's terminal), under `set -euo pipefail`. A serve block runs in
// the background with its output in a log, and the script goes on once its port answers; a later serve block on the
// same port stops it first, as a reader stops one server before starting the next on its port, and with it the
// background blocks started since (a trainer reading that server would only fail once it is gone).
import type { ShellBlock } from "./blocks.ts";

/** Seconds a serve block's port gets to answer (a first start compiles TypeScript and loads tokenizers). */
const SERVE_WAIT_S = 120;

const PREAMBLE = `set -euo pipefail
declare -A walk_started=()  # PID of each serve or background block still meant to run -> its log
declare -A walk_order=()  # PID of each serve or background block -> when it started (a count)
declare -A walk_background=()  # PIDs of background blocks (no port of their own)
walk_count=0
walk_wait_port() {  # PORT PID LOG: until 127.0.0.1:PORT accepts a connection; fails if PID exits first
  local tries=$(( ${SERVE_WAIT_S} * 5 ))
  for (( i = 0; i < tries; i++ )); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then echo "walk: exited before port $1 answered; its log:" >&2; cat "$3" >&2; return 1; fi
    sleep 0.2
  done
  echo "walk: port $1 did not answer in ${SERVE_WAIT_S} s; its log:" >&2; cat "$3" >&2; return 1
}
walk_check_started() {  # a server or client that the walk did not stop and that exited with an error fails the walk
  local pid status
  for pid in "\${!walk_started[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    status=0; wait "$pid" || status=$?
    if (( status != 0 )); then
      echo "walk: \${walk_started[$pid]##*/} exited $status; its log:" >&2; cat "\${walk_started[$pid]}" >&2; return 1
    fi
  done
}
walk_stop() {  # PID: it and what it started, children first (a reader's Ctrl-C on a server)
  local child
  for child in $(pgrep -P "$1" || true); do walk_stop "$child"; done
  kill "$1" 2>/dev/null || true
}
walk_free_port() {  # PORT: stops the serve block holding PORT (and background blocks started since), if any, and
  local var="walk_serving_$1" pid  # waits until the port is free
  if [[ -n "\${!var:-}" ]]; then
    for pid in "\${!walk_background[@]}"; do
      if (( walk_order[$pid] > walk_order[\${!var}] )); then walk_stop "$pid"; unset "walk_started[$pid]" "walk_background[$pid]"; fi
    done
    walk_stop "\${!var}"; unset "walk_started[\${!var}]" "$var"
    for (( i = 0; i < 150; i++ )); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null || return 0; sleep 0.2; done
  fi
}
`;

function logName(block: ShellBlock): string {
  return `${block.file.replace(/[^A-Za-z0-9.]+/g, "_")}-${block.line}.log`;
}

/**
 * The script running `blocks` (skips left out, named), writing serve logs under $WALK_LOGS; at the end it saves
 * the first serve block's last port's /metrics to $WALK_LOGS/metrics.txt for the caller's check, and fails if a serve
 * or background block it did not stop exited with an error (a trainer that gave up, a server that crashed).
 */
export function walkScript(blocks: readonly ShellBlock[]): string {
  const parts = [PREAMBLE];
  let metricsPort: number | null = null;
  for (const block of blocks) {
    const where = `${block.file}:${block.line}`;
    if (block.mode.kind === "skip") {
      parts.push(`echo ${JSON.stringify(`walk: ${where} skipped: ${block.mode.why}`)} >&2`);
      continue;
    }
    if (block.mode.kind === "serve") {
      const log = `"$WALK_LOGS/${logName(block)}"`;
      const ports = block.mode.ports;
      parts.push(
        `echo ${JSON.stringify(`walk: ${where} (${ports.length ? `serve ${ports.join(" ")}, ` : ""}in the background)`)} >&2`,
        ...ports.map((port) => `walk_free_port ${port}`),
        `(\n${block.text}\n) > ${log} 2>&1 &`,
        `walk_started[$!]=${log}`,
        `walk_order[$!]=$(( ++walk_count ))`,
        ...(ports.length ? [] : ["walk_background[$!]=1"]),
        ...ports.map((port) => `walk_serving_${port}=$!`),
        ...ports.map((port) => `walk_wait_port ${port} $! ${log}`),
      );
      metricsPort ??= ports.at(-1) ?? null; // the block's own server: the others are what it stands on
      continue;
    }
    parts.push(`echo ${JSON.stringify(`walk: ${where}`)} >&2`, block.text);
  }
  if (metricsPort !== null) {
    // Gone when a later serve block took its port: then there is nothing of it to check.
    parts.push(
      `curl -sf http://127.0.0.1:${metricsPort}/metrics > "$WALK_LOGS/metrics.txt" || rm -f "$WALK_LOGS/metrics.txt"`,
    );
  }
  parts.push("walk_check_started", `echo "walk: every block ran" >&2`);
  return parts.join("\n") + "\n";
}
