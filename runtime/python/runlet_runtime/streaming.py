"""A generator as a stream of protocol lines (`i<json>`, `e<json>`, `d`), each sent as soon as it is produced."""

import asyncio
import functools
import logging

from .encoding import ENCODING_ERRORS, encode_value, error_body

log = logging.getLogger("runlet_runtime")

DONE_LINE = b"d\n"


def _item_line(item):
    return b"i%s\n" % encode_value(item, "item")


def _error_line(error):
    return b"e%s\n" % error_body(error)


async def stream_iterator(connection, iterator, pool, context):
    """Streams a sync iterator; each next() runs on a worker so a slow generator never blocks the loop."""
    connection.begin_stream()
    step = functools.partial(_next_line, iterator, context)
    while True:
        line, finished = await pool.run(step)
        if connection.lost:
            break
        if finished:
            connection.end_stream(line)
            return
        connection.send_stream(line)
        await connection.writable()
        if connection.lost:
            break
    # The client went away. Close the generator so its finally blocks run, on a worker and only now that no
    # next() is in progress (closing a running generator raises).
    if not finished:
        await pool.run(functools.partial(_close, iterator, context))
    connection.end_stream(None)


def _next_line(iterator, context):
    """On a worker: the next line of the stream and whether it is the last."""
    try:
        item = next(iterator)
    except StopIteration:
        return DONE_LINE, True
    except BaseException as error:
        log.error("%s() raised mid-stream (request %s)", *context, exc_info=error)
        return _error_line(error), True
    try:
        return _item_line(item), False
    except ENCODING_ERRORS as error:
        log.warning("%s() yielded an item that cannot be encoded (request %s): %s", *context, error)
        _close(iterator, context)  # the stream ends here; let the generator clean up
        return _error_line(error), True


def _close(iterator, context):
    close = getattr(iterator, "close", None)
    if close is None:
        return
    try:
        close()
    except BaseException as error:
        log.error("closing the stream of %s() raised (request %s)", *context, exc_info=error)


async def stream_async_iterator(connection, iterator, context):
    """Streams an async iterator on the loop. A client going away cancels this task, which closes it."""
    connection.begin_stream()
    connection.on_disconnect = asyncio.current_task().cancel
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
