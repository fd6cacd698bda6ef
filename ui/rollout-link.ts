// The address of one rollout in a gateway's live UI (ui/static/rollout-link.js reads it): what `rlgate show` and
// `rlgate run` print, so a reader goes from the terminal to the rollout's tree, tokens and calls in one click.

/** `http://HOST:PORT/ui/#rollout=ID` of the gateway at `gatewayUrl`. */
export function rolloutUiUrl(gatewayUrl: string, rolloutId: string): string {
  return `${gatewayUrl.replace(/\/+$/, "")}/ui/#rollout=${encodeURIComponent(rolloutId)}`;
}
