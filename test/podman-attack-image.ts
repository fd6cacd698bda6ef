// The base image test/sandbox-attacks.test.ts runs its podman tasks on: this machine's packages (runner/podman-host-
// image.ts) and, where Node is a package here, Node with npm whole — the hook verifier runs node and npm from the task
// image, as a task's image would hold them. npm's folder is copied as it is: dpkg's list of its files is out of date
// where npm was updated in place. Content-addressed like the base image.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podman } from "../runner/podman.ts";
import { ensureHostImage, HOST_IMAGE_PACKAGES } from "../runner/podman-host-image.ts";

const NPM = "/usr/lib/node_modules/npm";

export async function attackBaseImage(): Promise<string> {
  const nodejs = spawnSync("dpkg-query", ["-W", "-f", "${Status}", "nodejs"], { encoding: "utf8" });
  if (!nodejs.stdout?.endsWith("installed") || !existsSync(NPM)) return ensureHostImage();
  const base = await ensureHostImage([...HOST_IMAGE_PACKAGES, "nodejs"]);
  const npmVersion = (JSON.parse(readFileSync(join(NPM, "package.json"), "utf8")) as { version: string }).version;
  const tag = `localhost/rlgate-attack-base:${createHash("sha256").update(`${base} npm ${npmVersion}`).digest("hex").slice(0, 16)}`;
  if (podman(["image", "exists", tag]).status === 0) return tag;
  const scratch = mkdtempSync(join(tmpdir(), "rlgate-attack-image-"));
  try {
    writeFileSync(join(scratch, "Containerfile"), `FROM ${base}\nCOPY . ${NPM}/\n`);
    const built = podman([
      "build",
      "--quiet",
      "--network",
      "none",
      "--tag",
      tag,
      "--file",
      join(scratch, "Containerfile"),
      NPM,
    ]);
    if (built.status !== 0) throw new Error(`building ${tag} failed: ${built.stderr.trim().slice(-1000)}`);
    return tag;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
