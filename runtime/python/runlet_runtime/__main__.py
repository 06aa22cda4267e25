"""`python3 -m runlet_runtime`: import the user's module once, then serve its functions until SIGTERM."""

import argparse
import asyncio
import functools
import gc
import importlib
import logging
import os
import signal
import sys
import threading
import traceback

from .dispatch import Dispatcher
from .import_report import IMPORT_FAILED_EXIT_STATUS, write_import_error
from .pool import WorkerPool
from .server import RECYCLE_EXIT_STATUS, Server

log = logging.getLogger("runlet_runtime")


def parse_options(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m runlet_runtime", description="Serve the functions of a Python module over HTTP.",
    )
    parser.add_argument("--app-dir", required=True, help="folder holding the user's module")
    parser.add_argument("--module", default="main", help="module to import (default: main)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port to listen on; 0 picks a free one")
    parser.add_argument("--port-file", help="file that receives the bound port once the runtime listens")
    parser.add_argument("--concurrency", type=_positive, default=4,
                        help="worker threads for plain functions and generator steps (default: 4)")
    parser.add_argument("--max-body-bytes", type=_positive, default=16 * 1024 * 1024,
                        help="largest accepted request body (default: 16 MiB)")
    parser.add_argument("--max-orphans", type=_positive,
                        help="abandoned calls (their caller stopped them) whose code may go on running on their threads "
                             "before the runtime recycles itself (default: --concurrency)")
    parser.add_argument("--import-error-file",
                        help="if the module cannot be imported, write what failed and where to this file (JSON: summary, "
                             "traceback) instead of printing it, and exit with status %d" % IMPORT_FAILED_EXIT_STATUS)
    parser.add_argument("--exit-with-stdin", action="store_true",
                        help="stop the calls in flight and exit when standard input closes (a supervisor holding its "
                             "write end died)")
    options = parser.parse_args(argv)
    if options.max_orphans is None:
        options.max_orphans = options.concurrency
    return options


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


# An import slower than this (a model loading) is announced, so a person waiting knows what the wait is.
SLOW_IMPORT_NOTICE_SECONDS = 1.0


def import_user_module(app_dir, module_name):
    sys.path.insert(0, os.path.abspath(app_dir))
    filename = module_name.replace(".", "/") + ".py"
    notice = threading.Timer(SLOW_IMPORT_NOTICE_SECONDS, log.info, ("importing %s ...", filename))
    notice.daemon = True
    notice.start()
    try:
        return importlib.import_module(module_name)
    finally:
        notice.cancel()


def write_port_file(path, port):
    """Written whole or not at all, so a supervisor polling the path never reads a partial number."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as file:
        file.write(str(port))
    os.replace(temporary, path)


async def serve(module, options):
    loop = asyncio.get_running_loop()
    pool = WorkerPool(loop, options.concurrency, on_orphaned=lambda orphans: server.orphaned(orphans))
    dispatcher = Dispatcher(module, pool)
    server = Server(dispatcher, options.max_body_bytes, options.max_orphans)
    _log_functions(options.module, dispatcher.function_names())
    try:
        port = await server.listen(options.host, options.port)
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", options.host, options.port, error)
        pool.shutdown()
        return 1
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, server.drain)
    if options.exit_with_stdin:
        await loop.connect_read_pipe(lambda: _StopOnClose(server.stop_now), sys.stdin)
    if options.port_file:
        write_port_file(options.port_file, port)
        # The file says where calls are taken: gone once they are not, so a supervisor watching it can tell.
        server.on_draining = functools.partial(_remove, options.port_file)
    log.info("listening on %s:%d (module %s, concurrency %d)",
             options.host, port, options.module, options.concurrency)
    await server.wait_drained()
    pool.shutdown()
    if server.recycling:
        log.info("drained; exiting to be started afresh (status %d)", RECYCLE_EXIT_STATUS)
        return RECYCLE_EXIT_STATUS
    log.info("drained; exiting")
    return 0


def _log_functions(module_name, names):
    # What is callable, said once: the author sees exactly what the module exposes (its own functions, or
    # its __all__), not what a reading of the source suggests.
    if names:
        log.info("functions of module %s: %s", module_name, ", ".join(names))
    else:
        log.warning("module %s has no functions to serve: no public function is defined in it (or named in "
                    "its __all__); imported ones are not served", module_name)


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class _StopOnClose(asyncio.Protocol):
    """Watches standard input: its end means the process that started the runtime is gone (even killed with
    SIGKILL, which leaves no chance to stop its children). Nobody will receive the answers of the calls in
    flight, and their runs are recorded as lost, so they are stopped rather than left to run on."""

    def __init__(self, stop):
        self._stop = stop

    def data_received(self, data):
        pass  # Nothing is ever sent; only the end matters.

    def eof_received(self):
        log.info("standard input closed: the supervisor is gone; stopping")
        self._stop()
        return False

    def connection_lost(self, exc):
        self._stop()


def _configure_logging():
    # Only the runtime's own logger: the root logger stays the user's to configure.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s runlet-runtime: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def main(argv=None):
    options = parse_options(argv)
    _configure_logging()
    try:
        module = import_user_module(options.app_dir, options.module)
    except BaseException as error:  # SystemExit and KeyboardInterrupt during import are failures to start, too
        if options.import_error_file:
            # Its reader reports it, once however many times it tries.
            write_import_error(options.import_error_file, error, options.app_dir)
            return IMPORT_FAILED_EXIT_STATUS
        traceback.print_exc()
        log.error("importing module %r from %s failed", options.module, options.app_dir)
        return 1
    # The module (often a large model) lives as long as the process: keep the collector from rescanning it.
    gc.freeze()
    return asyncio.run(serve(module, options))


if __name__ == "__main__":
    sys.exit(main())
