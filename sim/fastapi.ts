// What the simulated servers share as FastAPI apps: routing by a table of path → method → handler, and FastAPI's own
// answers for unknown paths and methods. (Its own module: the flavours import it while sim/flavor.ts imports them.)
import type { RouteHandler, SimFlavor } from "./flavor.ts";

export type RouteTable = Record<string, Partial<Record<string, RouteHandler>>>;

/** The routing part of a flavour: its route table, and FastAPI's answers (both servers are FastAPI apps). */
export function fastApiRoutes(routes: RouteTable): Pick<SimFlavor, "route" | "notFound" | "methodNotAllowed"> {
  return {
    route(method, path) {
      const methods = Object.hasOwn(routes, path) ? routes[path] : undefined;
      if (!methods) return undefined;
      return methods[method] ?? null;
    },
    notFound: () => ({ status: 404, body: { detail: "Not Found" } }),
    methodNotAllowed: () => ({ status: 405, body: { detail: "Method Not Allowed" } }),
  };
}
