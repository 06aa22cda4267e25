"""The worker threads that run blocking user code (plain functions, next() of generators)."""

import collections
import itertools
import queue
import threading

# A job's life. QUEUED → RUNNING → DONE, or abandoned on the way: SKIPPED (before it ran, so it never runs) or
# ORPHANED (while it ran: Python cannot stop a thread, so it runs on, on a thread no longer counted).
_QUEUED, _RUNNING, _DONE, _SKIPPED, _ORPHANED = range(5)


class Job:
    """One submission: what to run, who to tell, and how far it got."""

    __slots__ = ("work", "on_done", "state")

    def __init__(self, work, on_done):
        self.work = work
        self.on_done = on_done
        self.state = _QUEUED


class WorkerPool:
    """A fixed number of threads whose results are handed back to the event loop in batches.

    Lighter than ThreadPoolExecutor + run_in_executor on the hot path: no concurrent.futures.Future and no
    future chaining. Finished jobs queue up in `_finished`, and the loop is woken (a pipe write, a syscall)
    only when no wake-up is pending already, so under load one wake-up delivers many results.

    A job nobody waits for any more (its caller went away: a time limit, a shutdown) is abandoned. Its thread
    cannot be stopped, so a new thread takes its place: the pool always has `size` threads for the calls that
    are still wanted, and the orphaned thread ends when its job returns. `orphans` counts those still running.
    """

    def __init__(self, loop, size, on_orphaned=None):
        self._loop = loop
        self._jobs = queue.SimpleQueue()
        self._finished = collections.deque()
        self._wake_pending = False
        # Guards job states: a worker taking a job and the loop abandoning it must agree on who got there first.
        self._lock = threading.Lock()
        self._size = size
        self._thread_numbers = itertools.count()
        # Told (on the loop) the number of orphans each time a job is orphaned.
        self._on_orphaned = on_orphaned
        self.orphans = 0
        for _ in range(size):
            self._start_thread()

    def submit(self, work, on_done):
        """Runs work() on a worker, then on_done(result, error) on the loop (error None on success).

        A job abandoned before it ran gets on_done(None, None) without running. Returns the job.
        """
        job = Job(work, on_done)
        self._jobs.put(job)
        return job

    def run(self, work, owner=None):
        """work() on a worker, as an awaitable; `owner.job` is set to the job, so its owner can abandon it."""
        future = self._loop.create_future()

        def settle(result, error):
            if future.cancelled():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        job = self.submit(work, settle)
        if owner is not None:
            owner.job = job
        return future

    def abandon(self, job):
        """Nobody waits for the job any more: it never runs if it has not started, and if it runs, a new thread
        takes its place."""
        with self._lock:
            state = job.state
            if state == _QUEUED:
                job.state = _SKIPPED
            elif state == _RUNNING:
                job.state = _ORPHANED
                self.orphans += 1
        if state == _RUNNING:
            self._start_thread()
            if self._on_orphaned is not None:
                self._on_orphaned(self.orphans)

    def shutdown(self):
        """Lets idle workers end; a worker still inside user code ends with the process (daemon)."""
        for _ in range(self._size):
            self._jobs.put(None)

    def _start_thread(self):
        threading.Thread(target=self._work, name=f"runlet-worker-{next(self._thread_numbers)}", daemon=True).start()

    def _work(self):
        jobs = self._jobs
        lock = self._lock
        while True:
            job = jobs.get()
            if job is None:
                return
            with lock:
                skipped = job.state == _SKIPPED
                if not skipped:
                    job.state = _RUNNING
            if skipped:
                self._hand_over(job.on_done, None, None)
                continue
            self._run(job)
            with lock:
                orphaned = job.state == _ORPHANED
                job.state = _DONE
                if orphaned:
                    self.orphans -= 1
            if orphaned:
                return  # replaced when its job was orphaned: the pool has its `size` threads without this one

    def _run(self, job):
        # A function of its own so the worker drops its references to the result as soon as it is handed over.
        try:
            result = job.work()
        except BaseException as error:  # the worker must survive anything user code raises, SystemExit included
            self._hand_over(job.on_done, None, error)
            return
        self._hand_over(job.on_done, result, None)

    def _hand_over(self, on_done, result, error):
        self._finished.append((on_done, result, error))
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:
                pass  # the loop is closed: an orphan returned while the process exits, and nobody waits for it

    def _deliver(self):
        # Cleared before draining: a job finishing after this line schedules a new delivery, so none is missed.
        self._wake_pending = False
        finished = self._finished
        while finished:
            on_done, result, error = finished.popleft()
            on_done(result, error)
