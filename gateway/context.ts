// What the request handlers of one gateway share: each field is one concern's own object (the store, the upstream,
// the metrics, the logger, the settings). A function takes `Pick<GatewayContext, …>` of the fields it reads, so its
// signature says what it depends on and a test or bench builds only those; the request path (relay/exchange.ts, the
// surfaces, server.ts), which reaches nearly all of them, takes the whole context.
import type { Store } from "../store/store.ts";
import type { Logger } from "../util/log.ts";
import type { ClusterLink } from "./cluster/worker-link.ts";
import type { GatewayMetrics } from "./metrics.ts";
import type { PassthroughRoutes } from "./passthrough-routes.ts";
import type { PolicyGate } from "./policy/gate.ts";
import type { HistoryRepair } from "./repair/index.ts";
import type { KnownSecrets } from "./secrets.ts";
import type { TokenPrompts } from "./prompts/index.ts";
import type { TrajectorySettings } from "./trajectories.ts";
import type { TrajectoryThread } from "./trajectory-thread.ts";
import type { Upstream } from "./upstream/client.ts";
import type { UpstreamFlavor } from "./upstream/flavor.ts";
import type { RecentIdListsByRollout } from "./upstream/id-list.ts";
import type { MaxTokensCapSetting } from "./upstream/max-tokens-cap.ts";
import type { ModelMap } from "./upstream/model-map.ts";
import type { RoutedExpertsSetting } from "./upstream/routed-experts.ts";

export interface GatewayConfig {
  /** Largest accepted request body in bytes. */
  bodyLimitBytes: number;
  /** Refuse calls that no rollout claims. */
  requireRollout: boolean;
  /** Base URL handed to harnesses; by default taken from the Host header of the control-API request. */
  publicUrl: string | null;
  /** Bearer token for /api when set (required when listening beyond loopback). */
  controlToken: string | null;
  /** Harness calls need their rollout's key (default: on with a control token or beyond loopback). */
  requireKey: boolean;
  /** /metrics answers without the control token. */
  metricsPublic: boolean;
  /** The served model's number of token ids (--vocab-size); null: known from its family, else int32's range. */
  vocabSize: number | null;
  /** How finished rollouts become trajectories. */
  trajectories: TrajectorySettings;
  /** `--max-tokens-cap`: lower harnesses' max_tokens to N, or to what the upstream's context leaves (auto). */
  maxTokensCap?: MaxTokensCapSetting;
  /** `--rollout-timeout`: a new rollout without its own `deadline_s` is due this long after creation; 0: never. */
  rolloutTimeoutMs: number;
  /** `--routed-experts`: ask the upstream for routed experts (MoE routing replay) and keep them per token. */
  routedExperts?: RoutedExpertsSetting | null;
  /** Upstream routes a harness may reach without capture (the defaults plus `--passthrough`). */
  passthrough: PassthroughRoutes;
}

export interface GatewayContext {
  store: Store;
  metrics: GatewayMetrics;
  upstream: Upstream;
  /** How the upstream (vLLM, SGLang) is asked for token ids and how they are read back. */
  flavor: UpstreamFlavor;
  /** Requested model name → served model name. */
  modelMap: ModelMap;
  config: GatewayConfig;
  /** The tokens prompt mode (the gateway renders prompts and sends ids); null in messages mode. */
  tokenPrompts: TokenPrompts | null;
  /** Finished rollouts' reconstructions, computed off the event loop. */
  trajectories: TrajectoryThread;
  /** History repair of chat requests before they go upstream; null when turned off (--no-repair-history). */
  repair: HistoryRepair | null;
  /** The process's logger (util/log.ts), made by the CLI. */
  log: Logger;
  /** The control token and rollout keys: redacted from whatever goes upstream. */
  secrets: KnownSecrets;
  /** Each rollout's recent prompt id lists: an answer's prompt ids that continue one are compared, not read. */
  recentPromptIds: RecentIdListsByRollout;
  /** Weight updates: pauses of the upstreams, held calls, the policy version served now (gateway/policy). */
  policy: PolicyGate;
  /** Set in a worker of `rlgate serve --workers N`: the other workers' UI events and metrics, through the primary. */
  cluster?: ClusterLink;
}
