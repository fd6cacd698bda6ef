// ESLint (flat config) with typescript-eslint: the recommended rules, plus the ones that catch what review kept
// finding by hand: promises nobody awaits or handles, and code nothing uses. `npm run lint`; CI runs it.
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["node_modules/", "native/build/", ".rlgate/", "clients/python/", "**/*.d.mts", "proto/"],
  },
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's test() and describe() return promises the runner itself awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["test", "describe", "it", "suite"] },
          ],
        },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" },
      ],
      "@typescript-eslint/no-unused-expressions": "error",
      // Deliberate where used: JSON of unknown shape in tests and at API edges.
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },

  {
    files: ["**/*.mjs", "**/*.js", "**/*.cjs"],
    ignores: ["ui/static/**"],
    languageOptions: {
      globals: { process: "readonly", console: "readonly", URL: "readonly", module: "writable", require: "readonly" },
    },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },

  // The live page's modules run in a browser: its globals, none of Node's (tsconfig.ui.json checks their types).
  {
    files: ["ui/static/**/*.js"],
    languageOptions: {
      sourceType: "module",
      globals: Object.fromEntries(
        [
          "addEventListener",
          "AbortController",
          "clearTimeout",
          "document",
          "Element",
          "Event",
          "fetch",
          "getComputedStyle",
          "history",
          "HTMLElement",
          "HTMLInputElement",
          "innerWidth",
          "location",
          "Node",
          "requestAnimationFrame",
          "sessionStorage",
          "setInterval",
          "setTimeout",
          "SVGSVGElement",
          "TextDecoderStream",
          "URLSearchParams",
          "atob",
        ].map((name) => [name, "readonly"]),
      ),
    },
    rules: { "no-undef": "error", "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }] },
  },
);
