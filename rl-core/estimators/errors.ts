// Estimator input errors (kernel failures surface as KernelError from ../kernels/errors.ts).

export class EstimatorError extends Error {
  override readonly name = "EstimatorError";
  readonly code = "RLGATE_ESTIMATOR_BAD_INPUT";

  constructor(estimator: string, detail: string, options?: { cause?: unknown }) {
    super(`${estimator}: ${detail}`, options);
  }
}
