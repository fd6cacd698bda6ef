// The gRPC link between gateway, RL core and trainers: protocol loading, message shapes, byte arrays,
// backpressured sends, options and the one errorToStatus().
export * from "./arrays.ts";
export * from "./batch-codec.ts";
export * from "./errors.ts";
export * from "./messages.ts";
export * from "./options.ts";
export * from "./proto.ts";
export * from "./send.ts";
export * from "./server.ts";
export * from "./tls.ts";
