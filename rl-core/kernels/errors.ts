// Kernel failures. The native addon and the CUDA library return numeric status codes (native/src/status.h);
// the reference implementation reports the same conditions with the same codes. This module is the one
// place where a status becomes an error.
import { RlgateError } from "../../util/errors.ts";

export const KernelStatus = {
  OK: 0,
  BAD_ARGUMENT: 1,
  BAD_OFFSETS: 2,
  BAD_INDEX: 3,
  BAD_TREE: 4,
  BAD_MODE: 5,
  CUDA_UNAVAILABLE: 6,
  CUDA_ERROR: 7,
  OUT_OF_MEMORY: 8,
} as const;

export type KernelStatusCode = (typeof KernelStatus)[keyof typeof KernelStatus];

const CODES: Record<number, { code: string; message: string }> = {
  1: { code: "RLGATE_KERNEL_BAD_ARGUMENT", message: "argument of the wrong type, length or value" },
  2: {
    code: "RLGATE_KERNEL_BAD_OFFSETS",
    message: "row offsets must start at 0, never decrease and end at the token count",
  },
  3: { code: "RLGATE_KERNEL_BAD_INDEX", message: "a group, segment, node or leaf index is out of range" },
  4: { code: "RLGATE_KERNEL_BAD_TREE", message: "parent[i] must be -1 or less than i" },
  5: { code: "RLGATE_KERNEL_BAD_MODE", message: "unknown loss-aggregation mode or KL kind" },
  6: { code: "RLGATE_KERNEL_CUDA_UNAVAILABLE", message: "CUDA requested but no CUDA library or device" },
  7: { code: "RLGATE_KERNEL_CUDA_ERROR", message: "a CUDA runtime call failed" },
  8: { code: "RLGATE_KERNEL_OUT_OF_MEMORY", message: "out of memory" },
};

export class KernelError extends RlgateError {
  override readonly name = "KernelError";
  readonly status: number;
  readonly kernel: string;

  constructor(status: number, kernel: string, detail?: string, options?: { cause?: unknown }) {
    const known = CODES[status] ?? { code: "RLGATE_KERNEL_UNKNOWN", message: `unknown status ${status}` };
    super(known.code, `${kernel}: ${detail ?? known.message}`, options);
    this.status = status;
    this.kernel = kernel;
  }
}

/** Throws the KernelError for a non-zero status. */
export function checkStatus(status: number, kernel: string): void {
  if (status !== KernelStatus.OK) throw new KernelError(status, kernel);
}
