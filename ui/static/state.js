// @ts-check
// What the page holds: the table's page of rollouts (as the server searched and paged them), the selected rollout
// and its reconstruction, and the token texts decoded so far. One object the panels share; each panel owns its part.

/** @typedef {import("./types.js").Row} Row */
/** @typedef {import("./types.js").Reconstruction} Reconstruction */

export const state = {
  /** The rows of the page shown, by id (rows of rollouts outside it arrive by events only when they belong in it). */
  rows: /** @type {Map<string, Row>} */ (new Map()),
  /** Rollouts in the store that match the search (the server's count). */
  total: 0,
  /** Open rollouts in the store (the server's count). */
  open: 0,
  /** The search the page shows: text and status, as the server applies them. */
  query: "",
  status: "",
  /**
   * How the page shown was reached from the newest: per page turned, its cursor and how many rows the page before it
   * held (the newest page grows as rollouts are created); none on the newest page. And the next page's cursor.
   */
  cursors: /** @type {{ cursor: string, rows: number }[]} */ ([]),
  nextCursor: /** @type {string | null} */ (null),
  selected: /** @type {string | null} */ (null),
  detail: /** @type {Reconstruction | null} */ (null),
  treeShape: /** @type {string | null} */ (null),
  selectedNode: /** @type {{ key: string, callSeq: number } | null} */ (null),
  trajectoryId: /** @type {string | null} */ (null),
  colour: "logprob",
  texts: /** @type {Map<number, string>} */ (new Map()),
  /** Epoch ms of the calls seen live in the last seconds (the header's calls/s). */
  callTimes: /** @type {number[]} */ ([]),
};

/** Whether the page shown is the newest (where new rollouts appear as they are created). */
export const onFirstPage = () => state.cursors.length === 0;
