// The direction of rlgate's layers, checked in CI (`npm run lint:deps`). Each folder may import only the folders
// listed for it; tests, test support and benchmarks may import anything. docs/architecture.md draws the result.
//
//   cli → gateway | rl-core | runner | sim | replay → trajectory → store   (everyone may use tokenizer and util)
//   gateway → ui (the live UI's routes); replay → protocol, clients (re-delivery to a core)
//   gateway, rl-core, clients → protocol (the .proto loader, codecs, errors, TLS, dialing), which uses none of them
const ALLOWED = {
  util: [],
  tokenizer: ["util"],
  protocol: ["util"],
  store: ["util"],
  trajectory: ["store", "tokenizer", "util"],
  clients: ["protocol", "util"],
  sim: ["tokenizer", "util"],
  gateway: ["trajectory", "store", "protocol", "tokenizer", "util", "ui"],
  "rl-core": ["clients", "protocol", "util"],
  runner: ["clients", "tokenizer", "util"],
  // The live UI's gateway routes: store types and events, the tokenizer for token texts.
  ui: ["store", "tokenizer", "util"],
  // Replay and export: read captured rollouts (store, gateway API), rebuild trajectories, talk to servers and cores.
  replay: ["store", "trajectory", "protocol", "clients", "tokenizer", "util"],
  cli: [
    "gateway",
    "rl-core",
    "runner",
    "sim",
    "replay",
    "clients",
    "protocol",
    "trajectory",
    "store",
    "tokenizer",
    "util",
    "ui",
  ],
};
const FOLDERS = Object.keys(ALLOWED);
const TEST_CODE = "(\\.test\\.ts$|/test-support\\.ts$|/test-helpers\\.ts$|/testing/|/fixtures/)";

module.exports = {
  forbidden: [
    ...FOLDERS.map((folder) => ({
      name: `layer-${folder}`,
      comment: `${folder}/ may import only ${ALLOWED[folder].join(", ") || "itself"} of rlgate's folders`,
      severity: "error",
      from: { path: `^${folder}/`, pathNot: TEST_CODE },
      to: {
        path: `^(${FOLDERS.filter((f) => f !== folder && !ALLOWED[folder].includes(f)).join("|")})/`,
      },
    })),
    {
      name: "no-circular",
      comment: "no import cycles between modules",
      severity: "error",
      from: { pathNot: TEST_CODE },
      to: { circular: true, pathNot: TEST_CODE, viaOnly: { dependencyTypesNot: ["type-only"] } },
    },
    {
      name: "production-code-not-from-tests",
      comment: "production code never imports test code",
      severity: "error",
      from: { pathNot: `${TEST_CODE}|^(test|bench)/` },
      to: { path: `${TEST_CODE}|^(test|bench)/` },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|native/build|\\.rlgate)" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".mjs"] },
  },
};
