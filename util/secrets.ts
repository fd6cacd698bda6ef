// Credentials as presented in headers: scheme names compared case-insensitively (RFC 9110 §11.1), secrets compared in
// constant time, so that neither spelling nor timing tells a caller anything about a token.
import { createHash, timingSafeEqual } from "node:crypto";

/** The credentials of an `Authorization: <scheme> <credentials>` value when its scheme is `scheme` (any case). */
export function authCredentials(header: unknown, scheme = "bearer"): string | null {
  if (typeof header !== "string") return null;
  const space = header.indexOf(" ");
  if (space <= 0 || header.slice(0, space).toLowerCase() !== scheme) return null;
  const credentials = header.slice(space + 1).trim();
  return credentials.length ? credentials : null;
}

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();

/** True when `presented` is `secret`; compares digests with timingSafeEqual, so the time taken says nothing about it. */
export function sameSecret(presented: string | null | undefined, secret: string): boolean {
  if (typeof presented !== "string") return false;
  return timingSafeEqual(digest(presented), digest(secret));
}

/** True when an `Authorization` header carries `Bearer <token>` (scheme in any case, compared in constant time). */
export function bearerMatches(header: unknown, token: string): boolean {
  return sameSecret(authCredentials(header), token);
}
