// Reads a V8 CPU profile (`node --cpu-prof`) of the gateway into the steps of a captured call. Each sample is charged
// to the innermost frame of its stack that belongs to a step (a file of rlgate's, or a library or Node module that
// does one step's work), so Node's and the libraries' own frames count for the rlgate code that called them.
// Phases are the stretches between quiet runs of at least `IDLE_GAP_MS` (bench/gateway-profile.ts makes them); the
// gateway's timers may wake it within them.

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A step and how a frame is recognized as one of its (url fragment, or an exact function name). */
const STEPS: Array<{ step: string; urls?: string[]; functions?: string[] }> = [
  { step: "gc", functions: ["(garbage collector)"] },
  {
    step: "commit (LMDB transaction)",
    urls: ["/store/call-committer.ts", "/node_modules/lmdb/"],
    functions: ["transactionSync"],
  },
  {
    step: "record (build, check, encode, index)",
    urls: [
      "/gateway/capture/",
      "/store/",
      "/trajectory/prompt-index.ts",
      "/trajectory/prefix-tree.ts",
      "/node_modules/msgpackr/",
      "/gateway/metrics.ts",
      "/node_modules/prom-client/",
    ],
  },
  {
    step: "scan (events split, read, spliced; assembled)",
    urls: [
      "/gateway/sse-parser.ts",
      "/gateway/relay/native-events.ts",
      "/gateway/relay/write-batch.ts",
      "/gateway/relay/stream-",
      "/gateway/upstream/chat-chunk-scan.ts",
      "/gateway/upstream/json-splice.ts",
      "/gateway/upstream/vllm.ts",
      "/gateway/upstream/fields.ts",
      "/gateway/surfaces/chat/assembler.ts",
    ],
  },
  { step: "harness write (ServerResponse)", urls: ["node:_http_outgoing"] },
  { step: "harness HTTP (Node's server)", urls: ["node:_http_server", "node:_http_incoming", "node:_http_common"] },
  { step: "upstream HTTP (undici)", urls: ["/node_modules/undici/"] },
  {
    step: "forward (body, headers, dispatch)",
    urls: [
      "/gateway/forward.ts",
      "/gateway/headers.ts",
      "/gateway/upstream/client.ts",
      "/gateway/upstream/replica",
      "/gateway/upstream/upstream-call.ts",
      "/gateway/upstream/hash-ring.ts",
      "/gateway/relay/forwarded-payload.ts",
    ],
  },
  {
    step: "attribution (rollout, access)",
    urls: ["/gateway/attribution.ts", "/gateway/access.ts", "/util/secrets.ts"],
  },
  {
    step: "request (read, parse, route)",
    urls: [
      "/gateway/body.ts",
      "/gateway/server.ts",
      "/gateway/surfaces/",
      "/gateway/prompts/",
      "/gateway/upstream/max-tokens-cap.ts",
      "/gateway/upstream/model-map.ts",
      "/util/bounded-json.ts",
    ],
  },
  { step: "relay control (exchange, timings)", urls: ["/gateway/relay/", "/gateway/repair/"] },
];

const IDLE = "(idle)";
const OTHER_NODE = "node internals (event loop, sockets, timers)";
const OTHER = "other";
export const IDLE_GAP_MS = 800;
/** Gaps are looked for in slices of this length; one holding at most `WAKE_UP_MS` of work (timers firing) is quiet. */
const SLICE_MS = 100;
const WAKE_UP_MS = 5;

function stepOf(frame: ProfileNode["callFrame"]): string | null {
  for (const rule of STEPS) {
    if (rule.functions?.includes(frame.functionName)) return rule.step;
    if (rule.urls?.some((url) => frame.url.includes(url))) return rule.step;
  }
  return null;
}

export interface PhaseSteps {
  name: string;
  /** µs of CPU (non-idle samples) by step. */
  steps: Map<string, number>;
  /** µs of self time by function (`name file:line`), for the flame graph's widest frames. */
  functions: Map<string, number>;
  /** µs of CPU in the phase. */
  busy: number;
}

/** The profile's measured phases (the stretches between its last `names.length + 1` long idle runs), step by step. */
export function profileSteps(profile: Profile, names: string[]): PhaseSteps[] {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const stepCache = new Map<number, string>();
  const stepOfNode = (id: number): string => {
    const cached = stepCache.get(id);
    if (cached !== undefined) return cached;
    const leaf = byId.get(id)!.callFrame;
    let step: string | null = leaf.functionName === IDLE ? IDLE : null;
    for (let at: number | undefined = id; step === null && at !== undefined; at = parent.get(at))
      step = stepOf(byId.get(at)!.callFrame);
    step ??= leaf.url.startsWith("node:") || leaf.url === "" ? OTHER_NODE : OTHER;
    stepCache.set(id, step);
    return step;
  };
  // Sample i lasts until sample i + 1.
  const { samples, timeDeltas } = profile;
  const duration = (i: number) => timeDeltas[i + 1] ?? 0;
  // Gaps are found in slices of the timeline: a slice is quiet when it holds at most a timer's wake-up of work.
  const sliceOf: number[] = [];
  const sliceBusy: number[] = [];
  let elapsed = 0;
  for (let i = 0; i < samples.length; i++) {
    const slice = Math.floor(elapsed / (SLICE_MS * 1000));
    sliceOf.push(slice);
    sliceBusy[slice] ??= 0;
    if (stepOfNode(samples[i]!) !== IDLE) sliceBusy[slice] += duration(i);
    elapsed += duration(i);
  }
  const quiet = (slice: number) => (sliceBusy[slice] ?? 0) <= WAKE_UP_MS * 1000;
  const gaps: Array<{ start: number; end: number }> = [];
  for (let i = 0; i < samples.length;) {
    if (!quiet(sliceOf[i]!)) {
      i++;
      continue;
    }
    const start = i;
    while (i < samples.length && quiet(sliceOf[i]!)) i++;
    if (sliceOf[i - 1]! - sliceOf[start]! + 1 >= IDLE_GAP_MS / SLICE_MS) gaps.push({ start, end: i });
  }
  if (gaps.length < names.length + 1)
    throw new Error(`the profile holds ${gaps.length} idle gaps; ${names.length + 1} were expected`);
  const last = gaps.slice(-(names.length + 1));
  return names.map((name, k) => {
    const steps = new Map<string, number>();
    const functions = new Map<string, number>();
    let busy = 0;
    for (let i = last[k]!.end; i < last[k + 1]!.start; i++) {
      const id = samples[i]!;
      const step = stepOfNode(id);
      if (step === IDLE) continue;
      const us = duration(i);
      busy += us;
      steps.set(step, (steps.get(step) ?? 0) + us);
      const frame = byId.get(id)!.callFrame;
      const file = frame.url.replace(/^.*\/(node_modules\/[^/]+|[^/]+\/[^/]+)$/, "$1");
      const key = `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
      functions.set(key, (functions.get(key) ?? 0) + us);
    }
    return { name, steps, functions, busy };
  });
}

export function printSteps(phase: PhaseSteps, calls: number, top = 15): void {
  const perCall = (us: number) => (us / calls).toFixed(1).padStart(8);
  console.log(
    `\n${phase.name.toUpperCase()}: ${perCall(phase.busy).trim()} µs of CPU a call (on the gateway's thread)`,
  );
  for (const [step, us] of [...phase.steps].sort((a, b) => b[1] - a[1]))
    console.log(`  ${step.padEnd(48)} ${perCall(us)} µs  ${((100 * us) / phase.busy).toFixed(1).padStart(5)}%`);
  console.log(`  widest frames (self time):`);
  for (const [name, us] of [...phase.functions].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`    ${perCall(us)} µs  ${name}`);
}
