// CLIs under test relaunch themselves and spawn their tools' shells: they run detached, in their own process group,
// and are stopped by killing the whole group (killing the launcher alone leaves the worker running).
import type { ChildProcess } from "node:child_process";

export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}
