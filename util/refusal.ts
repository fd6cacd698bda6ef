// A start refused for a reason the user can fix (an unsafe address without a token, missing TLS files): the command
// line prints its message as one sentence, not a stack trace.
export class StartRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StartRefusal";
  }
}
