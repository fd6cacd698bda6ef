// A test that needs a component .ci/run installs (NumPy, nginx, openssl, bubblewrap, podman, the harness CLIs) may skip
// on a developer's machine without it, saying why; in CI (CI or RLGATE_REQUIRE_NATIVE set, as .ci/run does) the same
// absence is a broken CI and fails the run, so that nothing installed there is ever quietly untested.
import { podmanUnavailable } from "../runner/podman.ts";
import { sandboxUnavailable } from "../runner/sandbox.ts";

const IN_CI = Boolean(process.env["CI"] || process.env["RLGATE_REQUIRE_NATIVE"]);

/**
 * `why` (null when the component is there) as node:test's `skip` value: false when there, the reason otherwise;
 * throws in CI, naming what .ci/run should have installed.
 */
export function requireInCi(component: string, why: string | null): string | false {
  if (why === null) return false;
  if (IN_CI) throw new Error(`${why}: CI installs ${component} (.ci/run), so this test must run there`);
  return `${why} (${component} not installed)`;
}

/**
 * Why bubblewrap sandboxes cannot start here (null: they can), for a test's `skip`. A missing bwrap (or util-linux)
 * fails in CI, which installs it; a kernel or container that refuses user namespaces or overlayfs stays a skip.
 */
export function bwrapForTests(scratch: string): string | null {
  const why = sandboxUnavailable(scratch);
  return why && /is not installed/.test(why) ? requireInCi("bubblewrap", why) || null : why;
}

/**
 * Why podman containers cannot start here (null: they can). A missing podman fails in CI, which installs it; a runner
 * that is not root (the backend runs rootful podman) or a podman that cannot start here stays a skip.
 */
export function podmanForTests(): string | null {
  const why = podmanUnavailable();
  return why && /is not installed/.test(why) ? requireInCi("podman runc", why) || null : why;
}
