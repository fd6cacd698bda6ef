// Starting and stopping a grpc-js server (the gateway's and the core's).
import { ServerCredentials, type Server } from "@grpc/grpc-js";

/** Binds host:port (0 = any free port), without TLS unless credentials are given (tls.ts); resolves with the bound port. */
export function bindServer(
  server: Server,
  host: string,
  port: number,
  creds = ServerCredentials.createInsecure(),
): Promise<number> {
  const h = host.includes(":") ? `[${host}]` : host;
  return new Promise((resolve, reject) =>
    server.bindAsync(`${h}:${port}`, creds, (error, bound) => {
      if (!error) return resolve(bound);
      // Shaped as a listen error (syscall, code, address, port), so the CLI says what to change.
      const code = /EADDRINUSE|EACCES|EADDRNOTAVAIL/.exec(error.message)?.[0];
      reject(
        Object.assign(new Error(`cannot bind the gRPC server to ${h}:${port}: ${error.message}`), {
          syscall: "listen",
          code,
          address: host,
          port,
        }),
      );
    }),
  );
}

/** Lets calls finish for up to `graceMs`, then cuts the rest. */
export function shutdownServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The address clients should dial for a server bound to `host`. */
export function dialAddress(host: string, port: number): string {
  if (host === "0.0.0.0" || host === "::") return `127.0.0.1:${port}`;
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
