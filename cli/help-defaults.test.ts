// --help states durations and sizes as a person writes them, for every option of every command.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { Command } from "commander";
import { coreCommand } from "./core-command.ts";
import { doctorCommand } from "./doctor-command.ts";
import { formatBytes, formatDuration, humanDefaults } from "./help-defaults.ts";
import { bytes, duration } from "./option-parsers.ts";
import { replayCommand } from "./replay-command.ts";
import { serveCommand } from "./serve-command.ts";
import { simCommand } from "./sim-command.ts";

test("formatDuration and formatBytes read back as what they format", () => {
  for (const [ms, text] of [
    [0, "0"],
    [250, "250ms"],
    [1500, "1.5s"],
    [5000, "5s"],
    [60_000, "1m"],
    [3_600_000, "1h"],
    [4_200_000, "1h10m"],
    [604_800_000, "7d"],
  ] as const) {
    assert.equal(formatDuration(ms), text);
    if (!/\d[a-z]+\d/.test(text)) assert.equal(duration(text), ms);
  }
  for (const n of [1024 ** 4, 64 * 1024 ** 2, 1024 ** 2, 1000]) assert.equal(bytes(formatBytes(n)), n);
});

test("every duration and size option of every command shows its default in units", () => {
  const program = humanDefaults(
    new Command()
      .addCommand(serveCommand())
      .addCommand(simCommand())
      .addCommand(coreCommand())
      .addCommand(replayCommand())
      .addCommand(doctorCommand()),
  );
  let seen = 0;
  const walk = (command: Command) => {
    for (const option of command.options) {
      if (typeof option.defaultValue !== "number") continue;
      if (option.parseArg === duration) {
        seen++;
        assert.equal(option.defaultValueDescription, formatDuration(option.defaultValue), option.flags);
      } else if (option.parseArg === bytes) {
        seen++;
        assert.equal(option.defaultValueDescription, formatBytes(option.defaultValue), option.flags);
      }
    }
    command.commands.forEach(walk);
  };
  walk(program);
  assert.ok(seen >= 8, `${seen} options`);
});

test("rlgate serve --help and core --help, as printed: one default each, in units", () => {
  const help = (cmd: string) =>
    spawnSync(process.execPath, ["--import", "tsx", new URL("./index.ts", import.meta.url).pathname, cmd, "--help"], {
      encoding: "utf8",
      timeout: 120_000,
    }).stdout.replace(/\s+/g, " ");
  const serve = help("serve");
  assert.match(serve, /--rollout-timeout <duration> .*?\(default: 1h\)/);
  assert.match(serve, /--store-map-size <size> .*?\(default: 1tb\)/);
  assert.equal((/--workers <n> (.*?)--/.exec(serve)?.[1]?.match(/default/g) ?? []).length, 1);
  const core = help("core");
  assert.match(core, /--group-timeout <duration> .*?\(default: 1h10m\)/);
  assert.equal(
    (/--gateway <addr\[,addr\.\.\.\]> (.*?)--gateway-token/.exec(core)?.[1]?.match(/default/g) ?? []).length,
    1,
  );
});
