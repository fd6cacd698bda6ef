// @ts-check
// A link to one rollout: /ui/#rollout=ID opens it (what `rlgate show` and `rlgate run` print). Opening a rollout puts
// it in the address, so the back button and a copied address lead to it.

/**
 * @param {string} id
 * @returns {string}
 */
export const rolloutLink = (id) => `#rollout=${encodeURIComponent(id)}`;

/** The rollout the address names, or null. */
export function rolloutInAddress() {
  return new URLSearchParams(location.hash.slice(1)).get("rollout");
}

/** @param {string} id */
export function showRolloutInAddress(id) {
  if (rolloutInAddress() !== id) history.pushState(null, "", rolloutLink(id));
}

/**
 * The control token handed in the address (#token=…, as `rlgate serve` prints it): taken out of the address (the
 * rest of it, a rollout, stays) and returned.
 */
export function takeTokenFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (!token) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return token;
}
