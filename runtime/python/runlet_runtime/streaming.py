"""A generator as a stream of protocol lines (`i<json>`, `e<json>`, `d`), each sent as soon as it is produced."""

import asyncio
import collections
import functools
import logging
import time

from .encoding import ENCODING_ERRORS, encode_value, error_body

log = logging.getLogger("runlet_runtime")

DONE_LINE = b"d\n"


def _item_line(item):
    return b"i%s\n" % encode_value(item, "item")


def _error_line(error):
    return b"e%s\n" % error_body(error)


# A worker drives a generator in turns. A turn ends after this long and gives the thread back: the loop needs
# the GIL to write and mostly gets it only then, so this bounds how long a line made early in a turn waits (a
# generator that blocks in next() releases the GIL, so its lines go out at once). Each turn costs a loop round
# trip of some tens of microseconds: 0.2 ms keeps ~80% of the pace of a worker never interrupted.
_TURN_SECONDS = 0.0002
# ...or after this many bytes of lines: the loop starts the next turn only once the transport has room, so a
# client reading slowly holds up the generator instead of letting lines pile up in memory.
_TURN_BYTES = 256 * 1024


async def stream_iterator(connection, iterator, pool, context, call):
    """Streams a sync iterator; next() runs on a worker so a slow generator never blocks the loop.

    A worker calls next() over and over for a turn, encodes each item and hands the line over without waiting
    for the loop, which writes whatever has arrived each time it runs. A loop round trip per item capped one
    stream at ~10,000 items/s; one per turn lets it go over ten times faster. Between turns the worker is free
    for other calls.
    """
    connection.begin_stream()
    pump = _Pump(asyncio.get_running_loop(), connection, iterator, context)
    while True:
        last_line = await pool.run(pump.turn, call)  # the call abandons the turn if the client goes away
        pump.flush()  # the lines of the turn go before the last line
        if last_line is not None or connection.lost:
            break
        await connection.writable()
        if connection.lost:
            break
    if last_line is None:
        # The client went away. Close the generator so its finally blocks run, on a worker and only now that no
        # next() is in progress (closing a running generator raises).
        await pool.run(functools.partial(_close, iterator, context))
    connection.end_stream(last_line)  # writes nothing once the client is gone


class _Pump:
    """A sync iterator driven by a worker, its lines handed to the loop as they are made."""

    __slots__ = ("_loop", "_connection", "_iterator", "_context", "_lines", "_flush_pending")

    def __init__(self, loop, connection, iterator, context):
        self._loop = loop
        self._connection = connection
        self._iterator = iterator
        self._context = context
        # Appended by the worker, taken by the loop; deque.append and popleft are atomic, a list swap is not.
        self._lines = collections.deque()
        self._flush_pending = False

    def turn(self):
        """On a worker: items until the stream ends (returns its last line), or None once the turn is used up
        or the client is gone."""
        iterator, context, lines = self._iterator, self._context, self._lines
        budget = _TURN_BYTES
        deadline = time.monotonic() + _TURN_SECONDS
        while True:
            if self._connection.lost:
                return None
            try:
                item = next(iterator)
            except StopIteration:
                return DONE_LINE
            except BaseException as error:
                log.error("%s() raised mid-stream (request %s)", *context, exc_info=error)
                return _error_line(error)
            try:
                line = _item_line(item)
            except ENCODING_ERRORS as error:
                log.warning("%s() yielded an item that cannot be encoded (request %s): %s", *context, error)
                _close(iterator, context)  # the stream ends here; let the generator clean up
                return _error_line(error)
            lines.append(line)
            # The loop is woken once per batch: lines made before it runs go out together. An item is never
            # held back waiting for the next one, so a generator that yields and then blocks is read at once.
            if not self._flush_pending:
                self._flush_pending = True
                self._loop.call_soon_threadsafe(self.flush)
            budget -= len(line)
            if budget <= 0 or time.monotonic() >= deadline:
                return None

    def flush(self):
        """On the loop: writes the lines handed over so far, as one chunk."""
        # Cleared before taking the lines: a line added after this schedules another flush, so none is missed.
        self._flush_pending = False
        lines = self._lines
        if lines:
            self._connection.send_stream(b"".join([lines.popleft() for _ in range(len(lines))]))


def _close(iterator, context):
    close = getattr(iterator, "close", None)
    if close is None:
        return
    try:
        close()
    except BaseException as error:
        log.error("closing the stream of %s() raised (request %s)", *context, exc_info=error)


async def stream_async_iterator(connection, iterator, context):
    """Streams an async iterator on the loop. A client going away cancels this task (the call is abandoned),
    which closes it."""
    connection.begin_stream()
    try:
        while True:
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                last_line = DONE_LINE
                break
            except Exception as error:
                log.error("%s() raised mid-stream (request %s)", *context, exc_info=error)
                last_line = _error_line(error)
                break
            try:
                line = _item_line(item)
            except ENCODING_ERRORS as error:
                log.warning("%s() yielded an item that cannot be encoded (request %s): %s", *context, error)
                await _aclose(iterator, context)
                last_line = _error_line(error)
                break
            connection.send_stream(line)
            await connection.writable()
    except asyncio.CancelledError as error:
        await _aclose(iterator, context)
        # Without a disconnect the cancellation came from the generator itself: report it like any error.
        last_line = None if connection.lost else _error_line(error)
    connection.end_stream(last_line)


async def _aclose(iterator, context):
    aclose = getattr(iterator, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except BaseException as error:
        log.error("closing the stream of %s() raised (request %s)", *context, exc_info=error)
