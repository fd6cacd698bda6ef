// TLS for the gRPC link, the same rule at both ends: plaintext is the default only on loopback. A server bound
// beyond loopback refuses to start without a certificate (tokens would cross the network in the clear) unless
// told `insecure`; a client dialing beyond loopback uses TLS (the system's roots, or the given CA) unless told
// `insecure`. Certificates are PEM files, read once when the server or client is made.
import { StartRefusal } from "../util/refusal.ts";
import { readFileSync } from "node:fs";
import { credentials, ServerCredentials, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import { isLoopbackHost } from "./options.ts";

export interface TlsFiles {
  /** PEM certificate chain: a server's own; a client's for mutual TLS. */
  cert?: string | null;
  /** PEM private key of `cert`. */
  key?: string | null;
  /** PEM CA bundle. Client: the roots the server's certificate is checked against (default: the system's).
   *  Server: client certificates are required, and checked against it (mutual TLS). */
  ca?: string | null;
  /** Client: the name the server's certificate is checked for, when it differs from the host dialed. */
  serverName?: string | null;
  /** Plaintext beyond loopback: an explicit choice (tokens and batches cross the network unencrypted). */
  insecure?: boolean;
}

const read = (path: string, what: string): Buffer => {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(`cannot read the TLS ${what} ${path}: ${(error as Error).message}`);
  }
};

/** The host part of "host:port", "[v6]:port" or a bare host. */
export function hostOf(address: string): string {
  if (address.startsWith("[")) return address.slice(1, address.indexOf("]"));
  const colon = address.lastIndexOf(":");
  return colon > 0 && address.indexOf(":") === colon ? address.slice(0, colon) : address;
}

/** Credentials of a server bound to `host`; `what` names it in the refusal ("the trainer service"). */
export function serverCredentials(host: string, tls: TlsFiles = {}, what = "gRPC"): ServerCredentials {
  if (tls.cert || tls.key) {
    if (!tls.cert || !tls.key) throw new Error(`TLS for ${what} needs both a certificate and its key`);
    const pair = { cert_chain: read(tls.cert, "certificate"), private_key: read(tls.key, "key") };
    return ServerCredentials.createSsl(tls.ca ? read(tls.ca, "CA") : null, [pair], Boolean(tls.ca));
  }
  if (!isLoopbackHost(host) && !tls.insecure) {
    throw new StartRefusal(
      `refusing to serve ${what} on ${host} without TLS: tokens and data would cross the network in the clear ` +
        "(give a certificate and key, or choose plaintext explicitly with insecure)",
    );
  }
  return ServerCredentials.createInsecure();
}

/** Credentials (and the channel options they need) for dialing `target` ("host:port"). */
export function channelCredentials(
  target: string,
  tls: TlsFiles = {},
): { credentials: ChannelCredentials; options: ChannelOptions } {
  const wanted = Boolean(tls.ca || tls.cert || tls.key || tls.serverName);
  if (tls.insecure || (!wanted && isLoopbackHost(hostOf(target))))
    return { credentials: credentials.createInsecure(), options: {} };
  if (Boolean(tls.cert) !== Boolean(tls.key))
    throw new Error("a TLS client certificate needs its key (and the key its certificate)");
  return {
    credentials: credentials.createSsl(
      tls.ca ? read(tls.ca, "CA") : null,
      tls.key ? read(tls.key, "key") : null,
      tls.cert ? read(tls.cert, "certificate") : null,
    ),
    options: tls.serverName
      ? { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName }
      : {},
  };
}
