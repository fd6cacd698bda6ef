// Estimator input errors (kernel failures surface as KernelError from ../kernels/errors.ts).
import { RlgateError } from "../../util/errors.ts";

export class EstimatorError extends RlgateError<"RLGATE_ESTIMATOR_BAD_INPUT"> {
  override readonly name = "EstimatorError";

  constructor(estimator: string, detail: string, options?: { cause?: unknown }) {
    super("RLGATE_ESTIMATOR_BAD_INPUT", `${estimator}: ${detail}`, options);
  }
}
