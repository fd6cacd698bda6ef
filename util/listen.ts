// Listening as a promise: resolves once the server listens, rejects with the listen error (a port in use, an address
// not of this machine) and leaves no error listener of its own behind.
import type { ListenOptions, Server } from "node:net";

export function listen(server: Server, at: ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(at, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
