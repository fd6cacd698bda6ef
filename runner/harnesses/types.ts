// What a harness definition is: how its CLI is launched against one rollout (command line, environment, config files
// under HOME), and what a scripted session must know of it (its shell and sub-agent tools, how it compacts, its side
// calls). `rlgate run` uses the launch inside sandboxes; the e2e tests, `npm run harness-matrix` and
// `rlgate harness-check` use the same launch in temp dirs, so every preset a user runs is the one that is tested.

export interface HarnessContext {
  prompt: string;
  /** The gateway as the harness sees it, e.g. http://127.0.0.1:8700. */
  origin: string;
  rolloutId: string;
  /** The model name the harness asks for. */
  model: string;
  /** HOME of the harness's process (the files of its launch are written under it). */
  home: string;
  /** The folder it works in (its cwd). */
  workspace: string;
}

/** How a run differs from a fresh one-prompt session. */
export interface LaunchOptions {
  /** Continue the harness's most recent session in this workspace with the prompt (its continue/resume switch). */
  resume?: boolean;
  /** Set the harness's context budget so low that it compacts by itself (harnesses without a compaction command). */
  compact?: boolean;
}

export interface HarnessLaunch {
  /** The command line; argv[0] is found on PATH (rlgate's node_modules/.bin first) or is absolute. */
  argv: string[];
  env: Record<string, string>;
  /** Files to write under HOME before the harness starts (path relative to HOME → content). */
  files: Record<string, string>;
}

/** A tool call as a scripted model makes it (the sim's script format). */
export interface ScriptedToolCall {
  name: string;
  arguments: Record<string, unknown> | string;
}

/** A scripted thread that answers one of the harness's side calls (OpenCode's title request). */
export interface SideThread {
  thread: string;
  reasoning?: string;
  content: string;
}

/** What a scripted session needs to know of a harness to drive it through its own tools. */
export interface HarnessScripting {
  /** A call of the harness's shell tool running `command`. */
  shell(command: string): ScriptedToolCall;
  /** The harness's sub-agent tool and how to call it with a prompt, where it has one rlgate tests. */
  subAgent?(prompt: string): ScriptedToolCall;
  /** Why it has no sub-agent session. */
  noSubAgent?: string;
  /**
   * How it compacts its context: the prompt that asks for it in a continued session (its slash command; none when it
   * compacts by itself past a context budget, which `LaunchOptions.compact` sets low), and text of its summarization
   * request that the sim answers with a summary. Absent: `noCompaction` says why.
   */
  compaction?: { command?: string; summaryRequest: string };
  noCompaction?: string;
  /** Assistant messages the harness puts in its first request itself (Qwen Code's canned startup-context reply). */
  cannedAssistantTurns?: number;
  /** Scripted threads that answer its side calls. */
  sideThreads?: SideThread[];
}

export interface Harness {
  name: string;
  launch(ctx: HarnessContext, options?: LaunchOptions): HarnessLaunch;
  /** Its command in rlgate's node_modules/.bin (a devDependency), where it is one. */
  bin?: string;
  /** Why this harness cannot run on this installation (checked before any rollout), or null. */
  unavailable?(): string | null;
  /**
   * npm install alone does not make it runnable (its binary is downloaded from elsewhere at first use): tests without
   * it skip, in CI too.
   */
  fetchedSeparately?: boolean;
  /** The sandbox memory (--memory) it needs at least, where that is more than the default. */
  minMemoryBytes?: number;
  /**
   * The model name it is built for (its prompts and tools follow the name) and the `--model-map` pattern that covers
   * every name it asks for; tests run it so. Presets are given the served model's name instead (every CLI takes it).
   */
  ownModel?: { name: string; pattern: string };
  /**
   * Why it must be given its own model name (`rlgate run --model`, with the gateway's `--model-map`) where the served
   * name has a '/': it puts the name in the URL's path.
   */
  modelInPath?: string;
  scripting?: HarnessScripting;
}
