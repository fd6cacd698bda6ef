// The primary's listener of `rlgate serve --workers N`: it accepts each connection (paused: not a byte read) and
// hands it to the next free worker, round robin. node:cluster's own round robin closes its copy of a connection only
// when the worker confirms it, and a worker killed before it confirms never does: that connection was neither
// answered nor closed (the harness waited for its own timeout). Here every connection is settled:
// - a worker holds at most one connection it has not confirmed; the others wait in the primary for the first free
//   worker (nothing queues inside Node's IPC channel);
// - a worker's confirmation comes before it reads a byte; the primary then closes its copy;
// - a worker that dies holding an unconfirmed connection: the primary closes its copy (the worker may have read from
//   it, so no one else can answer) unless the send never reached the worker, and then another worker gets it;
// - a worker that is closing declines what reaches it: another worker gets it, unread;
// - no confirmation in time (10 s: the handle did not reach the worker, or it is stalled): the connection is ended,
//   and that worker gets no more until it answers or exits;
// - no worker free in time (30 s: all are restarting): the connection is closed, so its client can retry.
import type { Worker } from "node:cluster";
import { createServer, type Server, type Socket } from "node:net";
import { listen } from "../../util/listen.ts";
import type { PrimaryMessage } from "./messages.ts";

const CONFIRM_MS = 10_000;
const WAIT_MS = 30_000;

export interface ConnectionHandoffOptions {
  /** A line for the operator (a connection closed unconfirmed, an accept that failed). */
  log: (line: string) => void;
  /** How long a worker may take to confirm a connection (default CONFIRM_MS). */
  confirmMs?: number;
  /** How long a connection waits for a free worker (default WAIT_MS). */
  waitMs?: number;
}

interface Handed {
  id: number;
  socket: Socket;
  /** The IPC write carrying it completed: the worker may hold it and may have read from it. */
  written: boolean;
  /** Not confirmed in time: its client was told (the connection ended); the worker stays out until it answers. */
  expired: boolean;
  timer: NodeJS.Timeout;
}

export class ConnectionHandoff {
  readonly #server: Server;
  readonly #log: (line: string) => void;
  readonly #confirmMs: number;
  readonly #waitMs: number;
  /** Workers that take connections, in the order connections go round them. */
  readonly #workers: Worker[] = [];
  /** Each added worker's unconfirmed connection (null: it is free), until it exits. */
  readonly #unconfirmed = new Map<Worker, Handed | null>();
  /** Connections waiting for a free worker, oldest first, each with its deadline. */
  readonly #waiting = new Map<Socket, NodeJS.Timeout>();
  #next = 0;
  #nextId = 0;
  #closed = false;

  constructor(options: ConnectionHandoffOptions) {
    this.#log = options.log;
    this.#confirmMs = options.confirmMs ?? CONFIRM_MS;
    this.#waitMs = options.waitMs ?? WAIT_MS;
    // noDelay as an http.Server's own accepted sockets have it: a worker's server never accepts these.
    this.#server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) => this.#hand(socket));
  }

  /** Listens on `host`:`port` (0: a free port); resolves with the port, rejects with the listen error (in use …). */
  async listen(port: number, host: string): Promise<number> {
    await listen(this.#server, { port, host });
    this.#server.on("error", (error) => this.#log(`accepting a connection failed: ${error.message}`));
    return (this.#server.address() as { port: number }).port;
  }

  /** `worker` serves: it takes its turn, and connections that waited go out. */
  add(worker: Worker): void {
    if (this.#unconfirmed.has(worker)) return;
    this.#workers.push(worker);
    this.#unconfirmed.set(worker, null);
    this.#drain();
  }

  /** `worker` is closing: it gets no more connections (one it holds is settled when it confirms or exits). */
  retire(worker: Worker): void {
    const at = this.#workers.indexOf(worker);
    if (at >= 0) this.#workers.splice(at, 1);
  }

  /** The worker took connection `id`: the primary's copy is closed (the worker's stays open). */
  took(worker: Worker, id: number): void {
    const entry = this.#settle(worker, id);
    entry?.socket.destroy();
    this.#drain();
  }

  /** The worker, closing, declined connection `id` unread: another worker gets it (unless its time ran out). */
  declined(worker: Worker, id: number): void {
    const entry = this.#settle(worker, id);
    if (entry?.expired) entry.socket.destroy();
    else if (entry) this.#hand(entry.socket);
  }

  /** `worker` exited: its unconfirmed connection is closed, or handed on when the send never reached it. */
  remove(worker: Worker): void {
    this.retire(worker);
    const entry = this.#unconfirmed.get(worker);
    this.#unconfirmed.delete(worker);
    if (!entry) return;
    clearTimeout(entry.timer);
    if (entry.written || entry.expired) entry.socket.destroy();
    else this.#hand(entry.socket);
  }

  /**
   * Stops accepting; waiting connections are closed. Handed ones are their workers' to finish: not waited for here
   * (net.Server's close would wait for the workers to close every connection it sent them, kept-alive ones included).
   */
  close(): void {
    this.#closed = true;
    for (const [socket, timer] of this.#waiting) {
      clearTimeout(timer);
      socket.destroy();
    }
    this.#waiting.clear();
    this.#server.close();
  }

  /** The worker's unconfirmed connection when it is `id`, now no longer unconfirmed; the worker is free again. */
  #settle(worker: Worker, id: number): Handed | null {
    const entry = this.#unconfirmed.get(worker);
    if (!entry || entry.id !== id) return null;
    clearTimeout(entry.timer);
    this.#unconfirmed.set(worker, null);
    return entry;
  }

  #hand(socket: Socket): void {
    if (socket.destroyed) return;
    if (this.#closed) {
      socket.destroy();
      return;
    }
    const worker = this.#freeWorker();
    if (worker) this.#send(worker, socket);
    else this.#wait(socket);
  }

  /** The next worker, in turn, that holds no unconfirmed connection and whose channel is open. */
  #freeWorker(): Worker | null {
    const count = this.#workers.length;
    for (let k = 0; k < count; k++) {
      const worker = this.#workers[(this.#next + k) % count]!;
      if (this.#unconfirmed.get(worker) !== null || !worker.isConnected()) continue;
      this.#next = (this.#next + k + 1) % count;
      return worker;
    }
    return null;
  }

  #send(worker: Worker, socket: Socket): void {
    const id = this.#nextId++;
    const timer = setTimeout(() => {
      // Not confirmed (the handle did not reach the worker, or the worker is stalled): the connection is ended, which
      // reaches the client even when the worker holds a copy. The worker, still holding this entry, gets no more
      // connections until it confirms or declines it, or exits.
      if (this.#unconfirmed.get(worker) !== entry) return;
      entry.expired = true;
      socket.end(() => socket.destroy());
      this.#log(
        `gateway worker pid ${worker.process.pid} did not confirm a connection in ${this.#confirmMs} ms: the connection is closed, and the worker gets no more until it answers or is restarted`,
      );
    }, this.#confirmMs);
    timer.unref();
    const entry: Handed = { id, socket, written: false, expired: false, timer };
    this.#unconfirmed.set(worker, entry);
    const message: PrimaryMessage = { type: "rlgate:connection", id };
    // keepOpen: the primary closes its copy itself, once the worker confirms or is gone.
    worker.send(message, socket, { keepOpen: true }, (error: Error | null) => {
      if (this.#unconfirmed.get(worker) !== entry) return;
      if (!error) {
        entry.written = true;
        return;
      }
      // The channel closed before the exit is seen: this worker gets nothing more, another gets the connection. A
      // worker still connected after a failed send is stopped gracefully, and the primary starts another.
      this.retire(worker);
      this.#settle(worker, id);
      if (worker.isConnected()) {
        this.#log(
          `handing a connection to gateway worker pid ${worker.process.pid} failed (${error.message}): stopping it`,
        );
        worker.process.kill("SIGTERM");
      }
      this.#hand(socket);
    });
  }

  #wait(socket: Socket): void {
    const timer = setTimeout(() => {
      this.#waiting.delete(socket);
      socket.destroy();
    }, this.#waitMs);
    timer.unref();
    this.#waiting.set(socket, timer);
  }

  #drain(): void {
    for (const [socket, timer] of this.#waiting) {
      const worker = this.#freeWorker();
      if (!worker) return;
      clearTimeout(timer);
      this.#waiting.delete(socket);
      if (!socket.destroyed) this.#send(worker, socket);
    }
  }
}
