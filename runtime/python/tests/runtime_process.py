"""Starts the runtime as a real process against a fixture app and talks HTTP to it."""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

RUNTIME_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES_DIR = os.path.join(RUNTIME_DIR, "tests", "fixtures")

# Bounds for waits: generous, because the tests must pass on a loaded 2-core machine. They only cost time
# when something is broken.
WAIT_SECONDS = 20


class RuntimeProcess:
    """`python3 -m runlet_runtime` on an ephemeral port, its stderr collected line by line."""

    def __init__(self, app, *options, stdin=subprocess.DEVNULL):
        self.stdin = stdin
        self.app_dir = os.path.join(FIXTURES_DIR, app)
        self.options = options
        self.workdir = tempfile.mkdtemp(prefix="runlet-runtime-test-")
        self.port_file = os.path.join(self.workdir, "port")
        self.process = None
        self._output_reader = None
        self.port = None
        self._lines = []
        self._output_ended = False
        self._output_changed = threading.Condition()

    def start(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runlet_runtime", "--app-dir", self.app_dir, "--port", "0",
             "--port-file", self.port_file, *self.options],
            cwd=RUNTIME_DIR, stdin=self.stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self._output_reader = threading.Thread(target=self._collect_output, daemon=True)
        self._output_reader.start()
        return self

    def start_serving(self):
        """Starts the runtime and waits until it listens; the port comes from the port file."""
        self.start()
        self.wait_for_output("listening on")
        with open(self.port_file) as file:
            self.port = int(file.read())
        return self

    def _collect_output(self):
        for raw in self.process.stderr:
            with self._output_changed:
                self._lines.append(raw.decode("utf-8", "replace"))
                self._output_changed.notify_all()
        with self._output_changed:
            self._output_ended = True
            self._output_changed.notify_all()

    @property
    def output(self):
        with self._output_changed:
            return "".join(self._lines)

    def wait_for_output(self, text, count=1, timeout=WAIT_SECONDS):
        """Waits until `text` appeared on `count` stderr lines; fails with the output so far otherwise."""
        if not self.output_appears(text, count, timeout):
            raise AssertionError(f"runtime never printed {text!r} ({count}x); its stderr:\n{self.output}")

    def output_appears(self, text, count=1, timeout=WAIT_SECONDS):
        """Whether `text` appears on `count` stderr lines within `timeout`."""
        def appeared():
            return sum(text in line for line in self._lines) >= count

        with self._output_changed:
            return self._output_changed.wait_for(lambda: appeared() or self._output_ended, timeout) and appeared()

    def wait_for_exit(self, timeout=WAIT_SECONDS):
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"runtime did not exit; its stderr:\n{self.output}") from None

    def terminate(self):
        """SIGTERM; returns the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait_for_exit()

    def close(self):
        """Kills the process if it still runs and removes its files."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._output_reader.join(WAIT_SECONDS)
            self.process.stderr.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT_SECONDS)


def call(connection, name, arguments=None, *, body=None, headers=None, method="POST"):
    """(status, headers, decoded JSON body) of one request on `connection`."""
    if body is None and arguments is not None:
        body = json.dumps(arguments)
    connection.request(method, "/" + name, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    return response.status, response.headers, json.loads(data) if data else None


class RuntimeTestCase(unittest.TestCase):
    """One runtime process for all the tests of a class (they use distinct keys, so they don't interfere)."""

    app = "app"
    options = ()

    @classmethod
    def setUpClass(cls):
        cls.runtime = RuntimeProcess(cls.app, *cls.options).start_serving()

    @classmethod
    def tearDownClass(cls):
        try:
            # A clean drain also proves no call was left counted as in flight.
            status = cls.runtime.terminate()
            if status != 0:
                raise AssertionError(f"runtime exited {status}; its stderr:\n{cls.runtime.output}")
        finally:
            cls.runtime.close()

    def setUp(self):
        self.connection = self.runtime.connect()
        self.addCleanup(self.connection.close)

    def call(self, name, arguments=None, **kwargs):
        return call(self.connection, name, arguments, **kwargs)
