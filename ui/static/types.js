// @ts-check
// The shapes the page reads from the control API, as api.js hands them over (camelCase). Types only: nothing runs.

/**
 * @typedef {object} Rollout
 * @property {string} id
 * @property {string | null} group
 * @property {string | null} task
 * @property {string | null} harness
 * @property {string} status
 * @property {number | null} reward
 * @property {number} createdAt
 * @property {number | null} finishedAt
 * @property {number} calls
 */

/**
 * @typedef {object} RolloutPage
 * @property {Rollout[]} rollouts
 * @property {number} total
 * @property {string | null} nextCursor
 */

/**
 * @typedef {object} Stats
 * @property {number} calls
 * @property {Record<string, number>} breaks
 * @property {number} retainedTrajectories
 * @property {number} untrainedTrajectories
 * @property {number} deadLeaves
 * @property {number} uniqueTokens
 * @property {number} trainedTokens
 * @property {number} amplification
 */

/**
 * @typedef {object} Flags
 * @property {boolean} flagged
 * @property {string[]} reasons
 * @property {number} [ephemeralContextLeaves]
 */

/**
 * @typedef {object} Span
 * @property {number} start
 * @property {number} end
 * @property {string} kind
 * @property {number} callSeq
 */

/**
 * @typedef {object} RoutedExperts
 * @property {string} data base64
 * @property {string} dtype
 * @property {number} layers
 * @property {number} topK
 * @property {Uint8Array | Uint16Array} [values] decoded once, on first use
 */

/**
 * @typedef {object} Trajectory
 * @property {string} trajectoryId
 * @property {string} segment
 * @property {boolean} trained
 * @property {number | null} reward
 * @property {number[]} tokenIds
 * @property {number[]} lossMask
 * @property {(number | null)[]} logprobs
 * @property {Span[]} spans
 * @property {{ callSeq: number, choiceIndex: number }} leaf
 * @property {RoutedExperts} [routedExperts]
 */

/**
 * @typedef {object} TreeChoice
 * @property {number} index
 * @property {string} fate
 * @property {number} sampledTokens
 */

/**
 * @typedef {object} Attach
 * @property {string} kind
 * @property {{ callSeq: number, choiceIndex: number } | null} ref
 * @property {string} segmentId
 * @property {number} matchedTokens
 * @property {number} promptTokens
 */

/**
 * @typedef {object} TreeCall
 * @property {number} callSeq
 * @property {Attach | null} attach
 * @property {TreeChoice[]} choices
 * @property {string} status
 * @property {string} tokenSource
 */

/**
 * @typedef {object} Segment
 * @property {string} id
 * @property {string} kind
 * @property {boolean} trained
 */

/**
 * @typedef {object} Break
 * @property {number} callSeq
 * @property {string | null} [cause]
 * @property {number} at
 * @property {number} oldTokens
 * @property {number} newTokens
 */

/**
 * A rollout's reconstruction (GET /api/rollouts/{id}/trajectories).
 * @typedef {object} Reconstruction
 * @property {string} rolloutId
 * @property {Stats} stats
 * @property {Flags} flags
 * @property {Trajectory[]} trajectories
 * @property {TreeCall[]} calls
 * @property {Segment[]} segments
 * @property {Break[]} breaks
 */

/**
 * A row of the table: the rollout, its calls as counted live, and its reconstruction's figures once read.
 * @typedef {object} Row
 * @property {Rollout} record
 * @property {number} calls
 * @property {{ stats: Stats, flags: Flags, trajectories: number } | null} summary
 * @property {boolean} [fresh]
 */

/**
 * One window of GET /api/series.
 * @typedef {object} SeriesPoint
 * @property {number} at
 * @property {number} calls
 * @property {number} errors
 * @property {number} promptTokens
 * @property {number} sampledTokens
 * @property {number | null} overheadP50
 * @property {number | null} overheadP99
 * @property {number | null} latencyP50
 * @property {number | null} latencyP99
 * @property {number} finished
 * @property {number | null} rewardMean
 */

/**
 * @typedef {object} Series
 * @property {number} from
 * @property {number} to
 * @property {number} stepMs
 * @property {number | null} lastActivity
 * @property {SeriesPoint[]} points
 */

/**
 * GET /api/policy.
 * @typedef {object} PolicyState
 * @property {boolean} paused
 * @property {string | null} mode
 * @property {string | null} version
 * @property {number} pauses
 * @property {number | null} pausedAt
 * @property {number | null} resumesAt
 * @property {number} holding
 */

/**
 * A call event of /api/events (no bodies).
 * @typedef {object} CallEvent
 * @property {number} seq
 * @property {string | null} rolloutId
 * @property {string} status
 */

export {};
