// The `podman run` client keeps the user's podman configuration (the probe `podman info` ran with it) and nothing
// else of the runner's environment: no secret of the runner's reaches podman's process, and the agent's variables go
// in by --env only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { containerArgs, podmanClientEnv } from "./podman.ts";
import { DEFAULT_LIMITS } from "./sandbox.ts";

test("podman's own environment: PATH, HOME and the user's podman configuration, nothing else", () => {
  const env = podmanClientEnv({
    PATH: "/opt/bin:/usr/bin",
    HOME: "/home/u",
    CONTAINERS_STORAGE_CONF: "/home/u/storage.conf",
    CONTAINERS_CONF: "/home/u/containers.conf",
    CONTAINERS_REGISTRIES_CONF: "/home/u/registries.conf",
    XDG_RUNTIME_DIR: "/run/user/0",
    XDG_CONFIG_HOME: "/home/u/.config",
    OPENAI_API_KEY: "sk-secret",
    RLGATE_TOKEN: "t",
    XDG_SESSION_ID: "3",
  });
  assert.deepEqual(env, {
    PATH: "/opt/bin:/usr/bin",
    HOME: "/home/u",
    CONTAINERS_STORAGE_CONF: "/home/u/storage.conf",
    CONTAINERS_CONF: "/home/u/containers.conf",
    CONTAINERS_REGISTRIES_CONF: "/home/u/registries.conf",
    XDG_RUNTIME_DIR: "/run/user/0",
    XDG_CONFIG_HOME: "/home/u/.config",
  });
  assert.deepEqual(podmanClientEnv({}), { PATH: "/usr/bin:/bin", HOME: "/root" });
});

test("the configuration stays with podman: not one of its variables is passed into the container", () => {
  const args = containerArgs({
    name: "c",
    image: "img",
    timeoutSec: 1,
    user: "1000:1000",
    workdir: "/w",
    mounts: [],
    env: { A: "1" },
    argv: ["true"],
    limits: DEFAULT_LIMITS,
  });
  const envs = args.flatMap((a, i) => (args[i - 1] === "--env" ? [a] : []));
  assert.deepEqual(envs, ["A=1"]);
});
