"""From a call request to a running function: lookup, argument binding, calling, result encoding."""

import asyncio
import functools
import inspect
import json
import logging
import sys

from . import exports, problems
from .encoding import ENCODING_ERRORS, encode_value, error_body
from .streaming import stream_async_iterator, stream_iterator

log = logging.getLogger("runlet_runtime")

# Results of these types need no look at iterator or awaitable protocols before encoding.
_PLAIN_RESULT_TYPES = frozenset({dict, list, str, int, float, bool, type(None), tuple})

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class Function:
    """A function of the user's module (see exports.py), with what argument checking needs worked out once."""

    __slots__ = ("name", "target", "runs_on_loop", "accepted", "required", "takes_any_keyword")

    def __init__(self, name, target):
        self.name = name
        self.target = target
        # Calling these only creates a coroutine or generator object: no user code runs, so no worker is needed.
        self.runs_on_loop = (
            inspect.iscoroutinefunction(target)
            or inspect.isasyncgenfunction(target)
            or inspect.isgeneratorfunction(target)
        )
        try:
            parameters = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):  # no introspectable signature (some builtins): the call itself decides
            self.accepted, self.required, self.takes_any_keyword = frozenset(), (), True
            return
        # The same outcome as inspect.signature(target).bind(**arguments), without building a BoundArguments
        # per call. Positional-only parameters cannot be given by keyword, so they are never "accepted".
        self.accepted = frozenset(p.name for p in parameters if p.kind in _KEYWORD_KINDS)
        self.required = tuple(
            p.name for p in parameters
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )
        self.takes_any_keyword = any(p.kind is p.VAR_KEYWORD for p in parameters)

    def check_arguments(self, arguments):
        """Raises the 422 problem when the keyword arguments do not bind to the signature."""
        given = arguments.keys()
        missing = [name for name in self.required if name not in given or name not in self.accepted]
        unexpected = [] if self.takes_any_keyword else [name for name in given if name not in self.accepted]
        if missing or unexpected:
            raise problems.invalid_arguments(self.name, missing, unexpected)


class Dispatcher:
    """Finds and runs the functions of one imported module."""

    def __init__(self, module, pool):
        self._module = module
        self.pool = pool
        self._functions = {}
        self._tasks = set()  # strong references to running call tasks, which the loop only holds weakly

    def find(self, name):
        """The public function called `name`, or the 404 problem."""
        # The module's own namespace, as exports.py reads it: never what a module `__getattr__` would answer.
        target = None if name.startswith("_") else vars(self._module).get(name)
        function = self._functions.get(name)
        # Checked against the module each time: a module may rebind its names while it runs.
        if function is not None and function.target is target:
            return function
        if not exports.is_served(self._module, name, target):
            raise problems.function_not_found(self._module.__name__, name)
        function = self._functions[name] = Function(name, target)
        return function

    def function_names(self):
        """The names callable now, as find() decides them."""
        return exports.served_names(self._module)

    def prepare(self, name, body):
        """The function and keyword arguments of a call, or raises its 404/400/422 problem."""
        function = self.find(name)
        arguments = _decode_arguments(body)
        function.check_arguments(arguments)
        return function, arguments

    def start(self, connection, function, arguments, request_id, stream):
        """Runs the call; it ends with connection.finish_call() or, for a stream, connection.end_stream().

        Should the connection be lost first (the sidecar stopped the run, or went away), the call is abandoned.
        """
        call = _Call(self, connection, function, arguments, request_id, stream)
        connection.on_disconnect = call.abandon
        if function.runs_on_loop:
            call.task = self.spawn(call.run_on_loop())
        else:
            call.job = self.pool.submit(call.run_in_worker, call.worker_done)

    def spawn(self, coroutine):
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _decode_arguments(body):
    if not body:
        return {}
    try:
        arguments = json.loads(body.decode())
    except UnicodeDecodeError as error:
        raise problems.invalid_json(f"not UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise problems.invalid_json(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    # Valid JSON past what Python decodes (RFC 8259 lets a parser limit depth and numbers). Uncaught, these would
    # break the connection: the sidecar would see a crash, not a refusal.
    except RecursionError:
        raise problems.json_too_deep() from None
    except ValueError:  # the one other refusal of valid JSON: an integer of more digits than int() converts
        raise problems.json_integer_too_long(sys.get_int_max_str_digits()) from None
    if type(arguments) is not dict:
        raise problems.body_not_object(arguments)
    return arguments


class _Unfinished:
    """What a worker hands back when the rest of the call belongs on the loop (awaiting, streaming)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Call:
    """One call in flight."""

    __slots__ = (
        "dispatcher", "connection", "function", "arguments", "request_id", "stream",
        "job", "task", "cancellable", "abandoned",
    )

    def __init__(self, dispatcher, connection, function, arguments, request_id, stream):
        self.dispatcher = dispatcher
        self.connection = connection
        self.function = function
        self.arguments = arguments
        self.request_id = request_id
        self.stream = stream
        self.job = None  # the worker job running its user code, if any
        self.task = None  # the loop task carrying it on, if any
        # False while the task waits for a worker that drives a sync generator: cancelling it would skip closing
        # the generator, which the stream does itself once the worker hands the generator back.
        self.cancellable = True
        self.abandoned = False

    def abandon(self):
        """Nobody waits for this call any more: stop what can be stopped, and free its worker either way."""
        self.abandoned = True
        log.warning("%s() abandoned: its caller went away (request %s)", self.function.name, self.request_id)
        if self.job is not None:
            self.dispatcher.pool.abandon(self.job)
        if self.task is not None and self.cancellable:
            self.task.cancel()

    # Plain functions: called and, in the common case, encoded on a worker thread.

    def run_in_worker(self):
        result = self.function.target(**self.arguments)
        if type(result) not in _PLAIN_RESULT_TYPES:
            if _needs_loop(result, self.stream):
                return _Unfinished(result)
            if _is_iterator(result):
                result = list(result)  # a generator not streamed answers the list of its items
        return self.encode_result(result)

    def worker_done(self, outcome, error):
        self.job = None
        if self.abandoned:
            if type(outcome) is _Unfinished:
                _close_unwanted(outcome.value)
            return
        if error is not None:
            self.fail(error)
        elif type(outcome) is _Unfinished:
            self.task = self.dispatcher.spawn(self.complete_on_loop(outcome.value))
        else:
            self.connection.finish_call(*outcome)

    # Coroutines, generators, and whatever a worker handed back unfinished.

    async def run_on_loop(self):
        try:
            value = self.function.target(**self.arguments)
        except Exception as error:
            self.fail(error)
            return
        await self.complete_on_loop(value)

    async def complete_on_loop(self, value):
        context = (self.function.name, self.request_id)
        try:
            if inspect.isawaitable(value):
                value = await value
            if _is_async_iterator(value):
                if self.stream:
                    await stream_async_iterator(self.connection, value, context)
                    return
                value = [item async for item in value]
            elif _is_iterator(value):
                if self.stream:
                    self.cancellable = False
                    await stream_iterator(self.connection, value, self.dispatcher.pool, context, self)
                    return
                value = await self.dispatcher.pool.run(functools.partial(list, value), self)
        # CancelledError too: the runtime cancels an abandoned call, and user code may raise it itself.
        except (Exception, asyncio.CancelledError) as error:
            if not self.abandoned:
                self.fail(error)
            return
        if not self.abandoned:
            self.connection.finish_call(*self.encode_result(value))

    # Both paths.

    def encode_result(self, value):
        """(status, body) of a finished call; a result that cannot be encoded is the call's 500."""
        try:
            return 200, encode_value(value, "result")
        except ENCODING_ERRORS as error:
            log.warning("%s() returned a result that cannot be encoded (request %s): %s",
                        self.function.name, self.request_id, error)
            return 500, error_body(error)

    def fail(self, error):
        log.error("%s() raised (request %s)", self.function.name, self.request_id, exc_info=error)
        self.connection.finish_call(500, error_body(error))


def _close_unwanted(value):
    """Closes what a worker handed back for an abandoned call (a coroutine, a generator), so it never runs."""
    close = getattr(value, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            log.exception("closing the result of an abandoned call raised")


def _is_iterator(value):
    return hasattr(value, "__next__")


def _is_async_iterator(value):
    return hasattr(value, "__anext__")


def _needs_loop(value, stream):
    return inspect.isawaitable(value) or _is_async_iterator(value) or (stream and _is_iterator(value))
