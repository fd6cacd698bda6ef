// The primary's listener of `rlgate serve --workers N`: it accepts each connection (paused: not a byte read) and
// hands it to the next listening worker, round robin. node:cluster's own round robin closes its copy of a connection
// only when the worker confirms it, and a worker killed before it confirms never does: that connection was neither
// answered nor closed (the harness waited for its own timeout). Here a worker's death settles every connection handed
// to it: one it never received goes to another worker, one it may have read from is closed, so its client knows at
// once.
import type { Worker } from "node:cluster";
import { createServer, type Server, type Socket } from "node:net";
import type { PrimaryMessage } from "./messages.ts";

interface Handed {
  socket: Socket;
  /** The IPC write carrying it completed: the worker may hold it and may have read from it. */
  written: boolean;
}

export class ConnectionHandoff {
  readonly #server: Server;
  /** Workers that listen, in the order connections go round them. */
  readonly #workers: Worker[] = [];
  /** Connections handed to each worker that it has not confirmed taking, by handoff id. */
  readonly #handed = new Map<Worker, Map<number, Handed>>();
  /** Connections waiting for a worker that listens (all are starting or restarting). */
  readonly #waiting = new Set<Socket>();
  #next = 0;
  #nextId = 0;
  #closed = false;

  constructor() {
    this.#server = createServer({ pauseOnConnect: true }, (socket) => this.#hand(socket));
  }

  /** Listens on `host`:`port` (0: a free port); resolves with the port, rejects with the listen error (in use …). */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(port, host, () => {
        this.#server.off("error", reject);
        resolve((this.#server.address() as { port: number }).port);
      });
    });
  }

  /** `worker` listens: it takes its turn, and the connections that waited for one go out. */
  add(worker: Worker): void {
    if (this.#workers.includes(worker)) return;
    this.#workers.push(worker);
    this.#handed.set(worker, new Map());
    const waiting = [...this.#waiting];
    this.#waiting.clear();
    for (const socket of waiting) this.#hand(socket);
  }

  /** The worker confirmed it took connection `id`: the primary's copy of it is closed (the worker's stays open). */
  took(worker: Worker, id: number): void {
    const handed = this.#handed.get(worker);
    const entry = handed?.get(id);
    if (!entry) return;
    handed!.delete(id);
    entry.socket.destroy();
  }

  /** `worker` is closing: it gets no more connections (those handed to it are settled when it exits). */
  retire(worker: Worker): void {
    const at = this.#workers.indexOf(worker);
    if (at >= 0) this.#workers.splice(at, 1);
  }

  /**
   * `worker` exited: it gets no more connections. Connections it never received go to another worker;
   * those it may have received and not confirmed are closed (it may have read from them: no one else can answer).
   */
  remove(worker: Worker): void {
    this.retire(worker);
    const handed = this.#handed.get(worker);
    if (!handed) return;
    this.#handed.delete(worker);
    const entries = [...handed.values()];
    handed.clear(); // a late callback of a write to the dead channel finds nothing to hand again
    for (const entry of entries) {
      if (entry.written) entry.socket.destroy();
      else this.#hand(entry.socket);
    }
  }

  #hand(socket: Socket): void {
    if (socket.destroyed) return;
    if (this.#closed) {
      socket.destroy();
      return;
    }
    const worker = this.#workers[this.#next++ % Math.max(1, this.#workers.length)];
    const handed = worker && this.#handed.get(worker);
    if (!worker || !handed) {
      this.#waiting.add(socket);
      socket.once("close", () => this.#waiting.delete(socket));
      return;
    }
    const id = this.#nextId++;
    const entry: Handed = { socket, written: false };
    handed.set(id, entry);
    const message: PrimaryMessage = { type: "rlgate:connection", id };
    // keepOpen: the primary closes its copy itself, once the worker confirms (took) or is gone (remove).
    worker.send(message, socket, { keepOpen: true }, (error: Error | null) => {
      if (!error) {
        entry.written = true;
        return;
      }
      if (handed.delete(id)) this.#hand(socket); // the channel was closed: the worker never got it
    });
  }

  /**
   * Stops accepting; connections not yet handed are closed. Handed ones are their workers' to finish: not waited
   * for here (net.Server's close would wait for the workers to close every connection it sent them, keep-alive ones
   * included, and forever for a dead worker's).
   */
  close(): void {
    this.#closed = true;
    for (const socket of this.#waiting) socket.destroy();
    this.#waiting.clear();
    this.#server.close();
  }
}
