// errorToStatus: only an RlgateError's code says the caller is at fault; any other error (a TypeError from a bug
// included) is INTERNAL, with its stack logged.
import assert from "node:assert/strict";
import { status as Status } from "@grpc/grpc-js";
import { describe, test } from "node:test";
import { KernelError, KernelStatus } from "../rl-core/kernels/errors.ts";
import { EstimatorError } from "../rl-core/estimators/errors.ts";
import { GatewayError } from "../gateway/errors.ts";
import { RlgateError } from "../util/errors.ts";
import { float32s } from "./arrays.ts";
import { errorToStatus, LinkError } from "./errors.ts";

function mapped(error: unknown): { code: Status; details: string; rlgateCode: unknown; logged: string[] } {
  const logged: string[] = [];
  const s = errorToStatus(error, (line) => logged.push(line));
  return { code: s.code, details: s.details, rlgateCode: s.metadata?.get("rlgate-code")[0], logged };
}

describe("errorToStatus", () => {
  test("the caller's faults keep their status and code, and are not logged as internal", () => {
    const bad = mapped(new LinkError("RLGATE_BAD_REQUEST", "values has 3 entries"));
    assert.deepEqual(bad, {
      code: Status.INVALID_ARGUMENT,
      details: "RLGATE_BAD_REQUEST: values has 3 entries",
      rlgateCode: "RLGATE_BAD_REQUEST",
      logged: [],
    });
    assert.equal(mapped(new LinkError("RLGATE_UNAUTHORIZED", "no token")).code, Status.UNAUTHENTICATED);
    assert.equal(mapped(new EstimatorError("grpo", "empty group")).code, Status.INVALID_ARGUMENT);
    assert.equal(mapped(new KernelError(KernelStatus.BAD_OFFSETS, "grpo")).code, Status.INVALID_ARGUMENT);
    assert.equal(mapped(new KernelError(KernelStatus.OUT_OF_MEMORY, "grpo")).code, Status.RESOURCE_EXHAUSTED);
  });

  test("a TypeError or RangeError is our bug: INTERNAL, with its stack logged (it used to be INVALID_ARGUMENT)", () => {
    for (const error of [new TypeError("cannot read properties of undefined"), new RangeError("offset out of range")]) {
      const s = mapped(error);
      assert.equal(s.code, Status.INTERNAL);
      assert.equal(s.rlgateCode, undefined);
      assert.equal(s.logged.length, 1);
      assert.match(
        s.logged[0]!,
        new RegExp(`internal error answered as gRPC INTERNAL: ${error.name}: ${error.message}\\n\\s+at `),
      );
    }
  });

  test("an unknown code, a thrown string, an error shaped like ours but not one, a CUDA failure: INTERNAL, logged", () => {
    assert.equal(mapped(new RlgateError("RLGATE_SOMETHING_NEW", "x")).code, Status.INTERNAL);
    assert.deepEqual(mapped("boom"), {
      code: Status.INTERNAL,
      details: "boom",
      rlgateCode: undefined,
      logged: ["internal error answered as gRPC INTERNAL: boom"],
    });
    const lookalike = Object.assign(new Error("ENOENT"), { code: "RLGATE_BAD_REQUEST" });
    assert.equal(mapped(lookalike).code, Status.INTERNAL);
    const cuda = mapped(new KernelError(KernelStatus.CUDA_ERROR, "gae"));
    assert.equal(cuda.code, Status.INTERNAL);
    assert.equal(cuda.logged.length, 1);
  });

  test("every error class of rlgate shares the root and a stable code", () => {
    const errors = [
      new LinkError("RLGATE_CANCELLED", "x"),
      new GatewayError("RLGATE_UPSTREAM_TIMEOUT", "x", { cause: new Error("socket") }),
      new KernelError(KernelStatus.BAD_TREE, "tree"),
      new EstimatorError("rloo", "x"),
    ];
    for (const e of errors) {
      assert.ok(e instanceof RlgateError, e.name);
      assert.match(e.code, /^RLGATE_[A-Z_]+$/);
    }
    assert.equal((errors[1]!.cause as Error).message, "socket");
    assert.deepEqual(
      errors.map((e) => e.name),
      ["LinkError", "GatewayError", "KernelError", "EstimatorError"],
    );
  });

  test("bytes that are not whole values (a client's malformed array) are the client's fault", () => {
    assert.throws(
      () => float32s(new Uint8Array(7), "logprobs"),
      (e: unknown) => mapped(e).code === Status.INVALID_ARGUMENT && /logprobs: 7 bytes/.test((e as Error).message),
    );
  });
});
