"""HTTP/1.1 on an asyncio Protocol: request framing, keep-alive, responses, chunked streams, drain."""

import asyncio
import logging

from . import problems
from .problems import Problem

log = logging.getLogger("runlet_runtime")

_MAX_HEAD_BYTES = 64 * 1024
# Pipelined requests buffered while a call runs, beyond which the connection stops reading.
_PIPELINE_BUFFER_BYTES = 256 * 1024
_CLOSE_TIMEOUT_SECONDS = 5.0
# The exit status of a runtime that recycles itself (EX_TEMPFAIL): start it again, it did not crash.
RECYCLE_EXIT_STATUS = 75
# How long a connection refused for bad framing keeps reading (and dropping) input before it closes.
_LINGER_SECONDS = 2.0

_REASONS = {
    200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 411: "Length Required",
    413: "Content Too Large", 422: "Unprocessable Content", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


def _head(status, content_type, headers=b""):
    """A response head up to the content-length value, which is written per response."""
    return b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\n%scontent-length: " % (
        status, _REASONS[status].encode(), content_type, headers,
    )


_CALL_HEADS = {status: _head(status, b"application/json") for status in (200, 500)}
_HEALTHY_BODY = b'{"status":"ok"}'
_VALID_CALL_BODY = b'{"valid":true}'
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-runlet-stream\r\ntransfer-encoding: chunked\r\n"
)
_CLOSE_HEADER = b"connection: close\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LAST_CHUNK = b"0\r\n\r\n"


class Server:
    """The listening socket, the open connections, the calls in flight, and the drain that ends them.

    A call whose connection is lost (the sidecar stopped it at its time limit, or went away) is abandoned: it no
    longer counts as in flight, and its worker is replaced (pool.py). Its code may still run on its old thread;
    past `max_orphans` such calls, the runtime recycles: it drains, and the process exits with
    RECYCLE_EXIT_STATUS so that its supervisor starts a fresh one.
    """

    def __init__(self, dispatcher, max_body_bytes, max_orphans):
        self.dispatcher = dispatcher
        self.max_body_bytes = max_body_bytes
        self.max_orphans = max_orphans
        self.draining = False
        self.recycling = False
        # Called once when the runtime stops taking calls (a drain or a recycle begins).
        self.on_draining = None
        self._in_flight = 0
        self._connections = set()
        self._listener = None
        self._drained = asyncio.Event()
        self._all_closed = asyncio.Event()

    async def listen(self, host, port):
        """Starts listening; returns the bound port."""
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(lambda: HttpConnection(self), host, port, backlog=1024)
        return self._listener.sockets[0].getsockname()[1]

    def drain(self):
        """Stops accepting; new calls on open connections are refused; the calls in flight finish."""
        if self.draining:
            return
        self.draining = True
        self._listener.close()
        if self.on_draining is not None:
            self.on_draining()
        log.info("draining: %d call(s) in flight", self._in_flight)
        if not self._in_flight:
            self._drained.set()

    def orphaned(self, orphans):
        """Told by the pool how many abandoned calls still run; past the bound, the runtime recycles."""
        if orphans <= self.max_orphans or self.draining:
            return
        log.warning("%d abandoned call(s) still run on their threads (bound %d): recycling the runtime once the "
                    "calls in flight finish", orphans, self.max_orphans)
        self.recycling = True
        self.drain()

    def stop_now(self):
        """The client is gone for good: every connection is dropped (their calls abandoned), then the runtime exits."""
        self.drain()
        for connection in list(self._connections):
            connection.abort()

    async def wait_drained(self):
        """Returns once draining is over and the connections, all idle by then, are closed."""
        await self._drained.wait()
        for connection in list(self._connections):
            connection.close()
        if self._connections:
            try:
                await asyncio.wait_for(self._all_closed.wait(), _CLOSE_TIMEOUT_SECONDS)
            except asyncio.TimeoutError:
                log.warning("%d connection(s) did not close in time", len(self._connections))

    def connection_opened(self, connection):
        self._connections.add(connection)

    def connection_closed(self, connection):
        self._connections.discard(connection)
        if self.draining and not self._connections:
            self._all_closed.set()

    def call_started(self):
        self._in_flight += 1

    def call_finished(self):
        self._in_flight -= 1
        if self.draining and not self._in_flight:
            self._drained.set()


class HttpConnection(asyncio.Protocol):
    """One client connection. Its requests are handled one at a time, in order, so pipelining is safe."""

    def __init__(self, server):
        self._server = server
        self._dispatcher = server.dispatcher
        self._transport = None
        self._buffer = bytearray()
        self._pending_head = None  # the parsed head of a request whose body is still arriving
        self._discarding = 0  # bytes of a refused body still to skip
        self._busy = False  # a call of this connection is in flight
        self._keep_alive = True  # of the current request
        self._closing = False
        self._linger_timer = None
        self._reading_paused = False
        self._writing_paused = False
        self._writable_waiter = None
        self.lost = False
        # Set by a stream that must stop when the client goes away.
        self.on_disconnect = None

    # asyncio.Protocol

    def connection_made(self, transport):
        self._transport = transport
        self._server.connection_opened(self)

    def data_received(self, data):
        if self._closing:
            return  # lingering after a refusal, or closing: input is dropped
        self._buffer += data
        if not self._busy:
            self._process_requests()
        elif not self._reading_paused and len(self._buffer) > _PIPELINE_BUFFER_BYTES:
            self._reading_paused = True
            self._transport.pause_reading()

    def eof_received(self):
        # The sidecar never half-closes: end of input means the client is gone, so the connection closes
        # (returning None) and a stream in progress is stopped.
        return None

    def connection_lost(self, exc):
        self.lost = True
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        self._server.connection_closed(self)
        self._wake_writer()
        on_disconnect = self.on_disconnect
        # Nobody can receive its answer: the call no longer counts as in flight, whatever its code still does.
        self._call_done()
        if on_disconnect is not None:
            on_disconnect()

    def pause_writing(self):
        self._writing_paused = True

    def resume_writing(self):
        self._writing_paused = False
        self._wake_writer()

    # Used by the dispatcher and the streams

    def finish_call(self, status, body):
        """Answers the call in flight with a JSON body."""
        if not self.lost:
            self._write_response(_CALL_HEADS[status], body)
        self._call_done()

    def begin_stream(self):
        if not self.lost:
            self._transport.write(b"%s%s\r\n" % (_STREAM_HEAD, b"" if self._keep_alive else _CLOSE_HEADER))

    def send_stream(self, lines):
        """Sends one or more whole lines as one chunk."""
        if not self.lost:
            self._transport.write(b"%x\r\n%s\r\n" % (len(lines), lines))

    def end_stream(self, last_line):
        """Ends the stream in flight; last_line None when the client is gone."""
        self.on_disconnect = None
        if last_line is not None and not self.lost:
            self._transport.write(b"%x\r\n%s\r\n%s" % (len(last_line), last_line, _LAST_CHUNK))
        self._call_done()

    async def writable(self):
        """Returns when the client has taken enough of what was written, or is gone."""
        if self._writing_paused and not self.lost:
            self._writable_waiter = asyncio.get_running_loop().create_future()
            await self._writable_waiter

    def close(self):
        self._closing = True
        self._transport.close()

    def abort(self):
        """Drops the connection at once, unsent output and all: its call is abandoned."""
        self._closing = True
        self._transport.abort()

    # Requests

    def _process_requests(self):
        while not self._busy and not self._closing and self._buffer:
            if self._discarding:
                self._discard_body()
                continue
            try:
                request = self._take_request()
            except Problem as problem:
                self._refuse_connection(problem)
                return
            if request is not None:
                self._handle(*request)
            elif not self._discarding:
                return  # incomplete: wait for more bytes

    def _refuse_connection(self, problem):
        """Answers a request whose framing is unknown, after which nothing on the connection can be trusted.

        Closing at once with unread input would make the kernel reset the connection, which can destroy the
        answer before the client reads it. So the runtime stops writing, drops input until the client
        closes (end of input closes the connection), and closes it itself after a bound.
        """
        self._keep_alive = False
        self._write_response(_head(problem.status, b"application/problem+json", problem.headers), problem.body)
        self._closing = True
        self._buffer.clear()
        self._transport.write_eof()
        self._linger_timer = asyncio.get_running_loop().call_later(_LINGER_SECONDS, self._transport.close)

    def _discard_body(self):
        dropped = min(self._discarding, len(self._buffer))
        del self._buffer[:dropped]
        self._discarding -= dropped

    def _take_request(self):
        """(method, path, body, request_id, stream, validate) of the next complete request, or None."""
        buffer = self._buffer
        head = self._pending_head
        if head is None:
            end = buffer.find(b"\r\n\r\n", 0, _MAX_HEAD_BYTES)
            if end < 0:
                if len(buffer) >= _MAX_HEAD_BYTES:
                    raise problems.headers_too_large(_MAX_HEAD_BYTES)
                return None
            head = self._parse_head(bytes(buffer[:end]), end + 4)
            if head is None:
                return None
        method, path, length, request_id, stream, validate, expect_continue, body_start = head
        body_end = body_start + length
        if len(buffer) < body_end:
            if self._pending_head is None and expect_continue:
                self._transport.write(_CONTINUE)
            self._pending_head = head
            return None
        self._pending_head = None
        body = bytes(buffer[body_start:body_end])
        del buffer[:body_end]
        return method, path, body, request_id, stream, validate

    def _parse_head(self, head, body_start):
        """The fields of a request head that the runtime uses; None when its body is refused (413)."""
        lines = head.split(b"\r\n")
        request_line = lines[0].split(b" ")
        if len(request_line) != 3:
            raise problems.malformed_request("the request line is not 'METHOD target HTTP/1.x'")
        method, target, version = request_line
        if version == b"HTTP/1.1":
            self._keep_alive = True
        elif version == b"HTTP/1.0":
            self._keep_alive = False  # no keep-alive negotiation for 1.0 clients: one request per connection
        else:
            raise problems.malformed_request("only HTTP/1.1 and HTTP/1.0 are supported")
        length = None
        request_id = "-"
        stream = validate = expect_continue = False
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise problems.malformed_request("a header line has no colon")
            name = name.lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit() or (length is not None and int(value) != length):
                    raise problems.malformed_request("the Content-Length header is invalid")
                length = int(value)
            elif name == b"transfer-encoding":
                raise problems.length_required()
            elif name == b"connection":
                value = value.lower()
                if b"close" in value:
                    self._keep_alive = False
            elif name == b"x-request-id":
                request_id = value.strip().decode("latin-1")
            elif name == b"x-runlet-stream":
                stream = value.strip() == b"1"
            elif name == b"x-runlet-validate":
                validate = value.strip() == b"1"
            elif name == b"expect":
                expect_continue = value.strip().lower() == b"100-continue"
            elif name == b"origin" or name == b"sec-fetch-site":
                # Only the sidecar calls the runtime, and it sends neither. A browser sends one or the other on
                # every request (a page's script cannot remove them; Node's fetch sends neither): a web page that
                # found this loopback port (runlet dev's) must not call around the sidecar's and the dev server's
                # checks (issue 31).
                raise problems.from_a_browser()
        length = length or 0
        if length > self._server.max_body_bytes:
            if expect_continue:
                # The client waits for our go-ahead and never sends the body: refuse and end the connection.
                raise problems.body_too_large(length, self._server.max_body_bytes)
            # The body's extent is known, so skip it as it arrives and keep the connection.
            del self._buffer[:body_start]
            self._discarding = length
            self._respond_problem(problems.body_too_large(length, self._server.max_body_bytes))
            return None
        return method, target.partition(b"?")[0], length, request_id, stream, validate, expect_continue, body_start

    def _handle(self, method, path, body, request_id, stream, validate):
        name = path[1:].decode("latin-1") if path.startswith(b"/") else ""
        if method == b"POST":
            if self._server.draining:
                self._respond_problem(problems.DRAINING)
                return
            try:
                function, arguments = self._dispatcher.prepare(name, body)
            except Problem as problem:
                self._respond_problem(problem)
                return
            except Exception:
                # A fault of the runtime's own (or of an odd module attribute) while reading the call: answered,
                # so the connection and the calls behind it on it live on; uncaught, it would drop the connection.
                log.exception("preparing a call of %r failed (request %s)", name, request_id)
                self._respond_problem(problems.internal_error(f"the runtime failed to prepare the call of {name!r}"))
                return
            if validate:
                # The sidecar checks an async call before it answers 202: it would run, so nothing runs now.
                self._respond(_CALL_HEADS[200], _VALID_CALL_BODY)
                return
            self._busy = True
            self._server.call_started()
            self._dispatcher.start(self, function, arguments, request_id, stream)
        elif path == b"/healthz" and method == b"GET":
            if self._server.draining:
                self._respond_problem(problems.DRAINING)
            else:
                self._respond(_CALL_HEADS[200], _HEALTHY_BODY)
        else:
            try:
                self._dispatcher.find(name)
            except Problem as problem:
                self._respond_problem(problem)
                return
            self._respond_problem(problems.method_not_allowed(method.decode("latin-1"), "POST"))

    # Responses

    def _respond_problem(self, problem):
        self._respond(_head(problem.status, b"application/problem+json", problem.headers), problem.body)

    def _respond(self, head, body):
        """Answers a request that started no call."""
        self._write_response(head, body)
        if not self._keep_alive:
            self.close()

    def _write_response(self, head, body):
        self._transport.write(b"%s%d\r\n%s\r\n%s" % (
            head, len(body), b"" if self._keep_alive else _CLOSE_HEADER, body,
        ))

    def _call_done(self):
        if not self._busy:
            return  # ended already: its connection was lost first
        self._busy = False
        self.on_disconnect = None
        self._server.call_finished()
        if self.lost:
            return
        if not self._keep_alive:
            self.close()
            return
        if self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()
        if self._buffer:
            self._process_requests()

    def _wake_writer(self):
        waiter, self._writable_waiter = self._writable_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
