// Estimators are written once, as generators that yield kernel calls; a driver runs them either
// synchronously or with the async kernels (off the event loop, multi-threaded), with no second copy of
// the estimator logic.
import type { ExecOptions, KernelInput, KernelName, KernelOutput, Kernels } from "../kernels/index.ts";

export interface KernelCall {
  name: KernelName;
  input: unknown;
  /** Output arrays to write into (the kernel's `out` option); fresh ones when absent. */
  out?: unknown;
}

export type Steps<R> = Generator<KernelCall, R, unknown>;

/**
 * `const out = yield* call("broadcastRows", input)` inside an estimator generator; `out` reuses arrays the
 * estimator owns and no longer needs (a fresh multi-megabyte array costs more in page faults than most
 * kernels take to fill it).
 */
export function* call<K extends KernelName>(
  name: K,
  input: KernelInput<K>,
  out?: KernelOutput<K>,
): Generator<KernelCall, KernelOutput<K>, unknown> {
  return (yield { name, input, out }) as KernelOutput<K>;
}

const withOut = (options: ExecOptions | undefined, out: unknown) => (out === undefined ? options : { ...options, out });

type AnyKernel = (input: unknown, options?: ExecOptions & { out?: unknown }) => unknown;

export function runSync<R>(steps: Steps<R>, kernels: Kernels, options?: ExecOptions): R {
  let next = steps.next();
  while (!next.done) {
    const { name, input, out } = next.value;
    next = steps.next((kernels[name] as AnyKernel)(input, withOut(options, out)));
  }
  return next.value;
}

export async function runAsync<R>(steps: Steps<R>, kernels: Kernels, options?: ExecOptions): Promise<R> {
  let next = steps.next();
  while (!next.done) {
    const { name, input, out } = next.value;
    next = steps.next(await (kernels[`${name}Async`] as AnyKernel)(input, withOut(options, out)));
  }
  return next.value;
}
