// Listening as a promise: resolves once the server listens, rejects with the listen error (a port in use, an address
// not of this machine) and leaves no error listener of its own behind.
import { createServer, type AddressInfo, type ListenOptions, type Server } from "node:net";

export function listen(server: Server, at: ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(at, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** A loopback port nothing listens on now (the OS's pick, released): for a server a child process will start there,
 *  or an address that refuses connections. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await listen(server, { port: 0, host: "127.0.0.1" });
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
