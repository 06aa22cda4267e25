"""The worker threads that run blocking user code (plain functions, next() of generators)."""

import collections
import queue
import threading


class WorkerPool:
    """A fixed number of threads whose results are handed back to the event loop in batches.

    Lighter than ThreadPoolExecutor + run_in_executor on the hot path: no concurrent.futures.Future and no
    future chaining. Finished jobs queue up in `_finished`, and the loop is woken (a pipe write, a syscall)
    only when no wake-up is pending already, so under load one wake-up delivers many results.
    """

    def __init__(self, loop, size):
        self._loop = loop
        self._jobs = queue.SimpleQueue()
        self._finished = collections.deque()
        self._wake_pending = False
        self._threads = [
            threading.Thread(target=self._work, name=f"runlet-worker-{number}", daemon=True)
            for number in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job, on_done):
        """Runs job() on a worker, then on_done(result, error) on the loop (error None on success)."""
        self._jobs.put((job, on_done))

    def run(self, job):
        """job() on a worker, as an awaitable."""
        future = self._loop.create_future()

        def settle(result, error):
            if future.cancelled():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        self.submit(job, settle)
        return future

    def shutdown(self):
        """Lets idle workers end; a worker still inside user code ends with the process (daemon)."""
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self):
        jobs = self._jobs
        while True:
            item = jobs.get()
            if item is None:
                return
            self._run(*item)

    def _run(self, job, on_done):
        # A function of its own so the worker drops its references to the result as soon as it is handed over.
        try:
            outcome = (on_done, job(), None)
        except BaseException as error:  # the worker must survive anything user code raises, SystemExit included
            outcome = (on_done, None, error)
        self._finished.append(outcome)
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self):
        # Cleared before draining: a job finishing after this line schedules a new delivery, so none is missed.
        self._wake_pending = False
        finished = self._finished
        while finished:
            on_done, result, error = finished.popleft()
            on_done(result, error)
