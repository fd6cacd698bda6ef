// The time source of code whose behaviour depends on elapsed time (lease timeouts, sweeps): injected, so its tests
// move time forward instead of sleeping.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** A clock that moves only when told to (tests). */
export interface ManualClock {
  readonly now: Clock;
  advance(ms: number): void;
}

export function manualClock(start = Date.now()): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}
