// Writing to a gRPC stream with backpressure: the next message is written only once the previous one was
// handed to HTTP/2 (its write callback), so a consumer that stops reading stops the producer, which then
// holds one message at most. Cancellation is checked before every send.
import { LinkError } from "./errors.ts";

interface WritableCall {
  cancelled?: boolean;
  destroyed: boolean;
  writableEnded: boolean;
  write(message: unknown, callback: (error?: Error | null) => void): boolean;
  once(event: "cancelled" | "close" | "error", listener: (...args: unknown[]) => void): unknown;
  off(event: "cancelled" | "close" | "error", listener: (...args: unknown[]) => void): unknown;
}

export function isOpen(call: WritableCall): boolean {
  return !call.cancelled && !call.destroyed && !call.writableEnded;
}

export function send(call: WritableCall, message: unknown): Promise<void> {
  if (!isOpen(call)) return Promise.reject(new LinkError("RLGATE_CANCELLED", "the call was cancelled"));
  return new Promise<void>((resolve, reject) => {
    // grpc-js never calls a write's callback once the call is cancelled: the events settle it instead.
    const gone = () => {
      cleanup();
      reject(new LinkError("RLGATE_CANCELLED", "the call ended before the message was sent"));
    };
    const cleanup = () => {
      call.off("cancelled", gone);
      call.off("close", gone);
      call.off("error", gone);
    };
    call.once("cancelled", gone);
    call.once("close", gone);
    call.once("error", gone);
    call.write(message, (error) => {
      cleanup();
      if (error) reject(new LinkError("RLGATE_CANCELLED", `write failed: ${error.message}`, { cause: error }));
      else resolve();
    });
  });
}
