// `rlgate doctor`'s sandbox lines: whether `rlgate run` can start a rollout's sandbox here, with bubblewrap (the
// default) and with podman (`--sandbox podman`), each asked of the very probe `rlgate run` makes before its first
// rollout. Neither is needed to serve or train: a missing one warns.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podmanUnavailable } from "../runner/podman.ts";
import { sandboxUnavailable } from "../runner/sandbox.ts";
import type { Check } from "./doctor-command.ts";

export function checkBubblewrap(): Check {
  const scratch = mkdtempSync(join(tmpdir(), "rlgate-doctor-bwrap-"));
  // As rlgate run's work folder: the sandbox's user (not root's, when rlgate runs as root) walks through it.
  chmodSync(scratch, 0o711);
  try {
    const why = sandboxUnavailable(join(scratch, "probe"));
    return why
      ? { name: "bubblewrap", level: "warn", detail: `${why}: rlgate run cannot sandbox rollouts` }
      : { name: "bubblewrap", level: "ok", detail: "a sandbox starts (rlgate run's default)" };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function checkPodman(): Check {
  const why = podmanUnavailable();
  return why
    ? { name: "podman", level: "warn", detail: `${why}: rlgate run --sandbox podman will not start` }
    : { name: "podman", level: "ok", detail: "runs containers (rlgate run --sandbox podman)" };
}

export function checkSandboxes(): Check[] {
  return [checkBubblewrap(), checkPodman()];
}
