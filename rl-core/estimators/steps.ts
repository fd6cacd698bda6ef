// Estimators are written once, as generators that yield kernel calls; a driver runs them either
// synchronously or with the async kernels (off the event loop, multi-threaded), with no second copy of
// the estimator logic.
import type { ExecOptions, KernelInput, KernelName, KernelOutput, Kernels } from "../kernels/index.ts";

export interface KernelCall {
  name: KernelName;
  input: unknown;
}

export type Steps<R> = Generator<KernelCall, R, unknown>;

/** `const out = yield* call("broadcastRows", input)` inside an estimator generator. */
export function* call<K extends KernelName>(name: K, input: KernelInput<K>): Generator<KernelCall, KernelOutput<K>, unknown> {
  return (yield { name, input }) as KernelOutput<K>;
}

type AnyKernel = (input: unknown, options?: ExecOptions) => unknown;

export function runSync<R>(steps: Steps<R>, kernels: Kernels, options?: ExecOptions): R {
  let next = steps.next();
  while (!next.done) {
    const { name, input } = next.value;
    next = steps.next((kernels[name] as AnyKernel)(input, options));
  }
  return next.value;
}

export async function runAsync<R>(steps: Steps<R>, kernels: Kernels, options?: ExecOptions): Promise<R> {
  let next = steps.next();
  while (!next.done) {
    const { name, input } = next.value;
    next = steps.next(await (kernels[`${name}Async`] as AnyKernel)(input, options));
  }
  return next.value;
}
