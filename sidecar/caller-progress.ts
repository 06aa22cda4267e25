// Whether a caller reads what it is sent. A call whose answer is written as it comes (a stream, a custom
// app's answer, a large sync result) holds its concurrency slot for as long as its caller takes to read it;
// one that reads nothing would hold it until the run's time limit (up to 12 h). "Reads nothing" is judged by
// what waits in the socket for the caller, not by what the function yields: a quiet stream whose caller is
// caught up has nothing waiting, and is not stalled.
import type { Socket } from 'node:net';

/**
 * libuv's count of the bytes of the socket's writes not yet handed to the kernel. It shrinks as the caller
 * reads, within a write, where `writableLength` shrinks only once a whole write is out: a caller reading a
 * 1 MB event at a few KiB a second shows progress. Not in Node's types (the socket's handle is internal).
 */
interface SocketHandle {
  writeQueueSize?: number;
}

export class CallerProgress {
  readonly #socket: Socket;
  /** What waited for the caller at the last look: in Node's buffer, and in libuv's queue. */
  #unsent = 0;
  #queued = 0;
  /** When the caller was last seen caught up, or reading: on the `performance.now()` clock. */
  #since: number;
  readonly #onDrain = (): void => {
    this.#since = performance.now();
  };

  constructor(socket: Socket, now: number) {
    this.#socket = socket;
    this.#since = now;
    socket.on('drain', this.#onDrain);
  }

  /** How long the caller has read nothing of what waits for it (0 when nothing waits), in ms. */
  stalledFor(now: number): number {
    const unsent = this.#socket.writableLength;
    if (unsent === 0) {
      this.#since = now;
      this.#unsent = 0;
      this.#queued = 0;
      return 0;
    }
    const queued = (this.#socket as unknown as { _handle: SocketHandle | null })._handle?.writeQueueSize ?? unsent;
    if (unsent < this.#unsent || queued < this.#queued) this.#since = now;
    this.#unsent = unsent;
    this.#queued = queued;
    return now - this.#since;
  }

  /** The run is over: the socket may serve the connection's next request, watched by no one. */
  stop(): void {
    this.#socket.off('drain', this.#onDrain);
  }
}
