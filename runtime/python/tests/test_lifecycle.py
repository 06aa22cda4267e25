"""Start-up, the worker pool, and shutdown: real processes, signals and exit statuses."""

import json
import os
import socket
import subprocess
import threading
import unittest
import uuid

from .runtime_process import WAIT_SECONDS, RuntimeProcess, call


class RuntimeCase(unittest.TestCase):
    def start(self, app="app", *options):
        runtime = RuntimeProcess(app, *options)
        self.addCleanup(runtime.close)
        return runtime

    def in_background(self, function, *arguments):
        """Runs function in a thread; the returned list receives its result."""
        results = []
        thread = threading.Thread(target=lambda: results.append(function(*arguments)), daemon=True)
        thread.start()
        self.addCleanup(thread.join, WAIT_SECONDS)
        return thread, results

    def make_fifo(self, runtime):
        path = os.path.join(runtime.workdir, f"fifo-{uuid.uuid4()}")
        os.mkfifo(path)
        # Opened read-write, the FIFO has a writer at once: the fixture's open() for reading does not block,
        # and its readline() returns as soon as the test writes a line.
        descriptor = os.open(path, os.O_RDWR)
        self.addCleanup(os.close, descriptor)
        return path, descriptor


class StartupTests(RuntimeCase):
    def test_import_error_exits_1_with_the_traceback(self):
        runtime = self.start("broken").start()
        self.assertEqual(runtime.wait_for_exit(), 1)
        runtime.wait_for_output("Traceback (most recent call last)")
        runtime.wait_for_output("RuntimeError: model weights not found")
        self.assertFalse(os.path.exists(runtime.port_file))

    def test_import_error_file_says_where_and_what_once(self):
        for app, summary in [("broken", r"^main\.py line 3: RuntimeError: model weights not found$"),
                             ("syntax_error", r"^main\.py line 4: SyntaxError: ")]:
            with self.subTest(app=app):
                runtime = self.start(app)
                error_file = os.path.join(runtime.workdir, "import-error")
                runtime.options = ("--import-error-file", error_file)
                self.assertEqual(runtime.start().wait_for_exit(), 78)
                with open(error_file) as file:
                    report = json.load(file)
                self.assertRegex(report["summary"], summary)
                self.assertIn("Traceback (most recent call last)", report["traceback"])
                # The supervisor prints it once, however many times it tries: the runtime prints nothing.
                runtime._output_reader.join(WAIT_SECONDS)
                self.assertEqual(runtime.output, "")

    def test_slow_import_is_announced_while_it_runs(self):
        runtime = self.start("slow_import")
        gate, descriptor = self.make_fifo(runtime)
        os.environ["RUNLET_TEST_IMPORT_FIFO"] = gate
        self.addCleanup(os.environ.pop, "RUNLET_TEST_IMPORT_FIFO")
        runtime.start()
        runtime.wait_for_output("importing main.py ...")
        self.assertFalse(os.path.exists(runtime.port_file))
        os.write(descriptor, b"done\n")
        runtime.wait_for_output("listening on")

    def test_port_file_holds_the_bound_port(self):
        runtime = self.start().start_serving()
        connection = runtime.connect()
        self.addCleanup(connection.close)
        self.assertEqual(call(connection, "add", {"a": 1, "b": 1})[2], 2)
        self.assertEqual(os.listdir(runtime.workdir), ["port"])  # no temporary file left behind
        self.assertEqual(runtime.terminate(), 0)

    def test_bad_option_exits_non_zero(self):
        runtime = self.start("app", "--concurrency", "0").start()
        self.assertNotEqual(runtime.wait_for_exit(), 0)


class ConcurrencyTests(RuntimeCase):
    def test_plain_functions_run_concurrently_up_to_the_concurrency(self):
        runtime = self.start("app", "--concurrency", "2").start_serving()
        key = str(uuid.uuid4())
        calls = [self.in_background(self.call_on_new_connection, runtime, "hold", {"key": key, "tag": tag})
                 for tag in ("a", "b", "c")]
        # Two calls hold both workers at the same time...
        runtime.wait_for_output(f"started hold {key}", count=2)
        # ...and the third waits for a free worker. (A bounded wait that is expected to run out.)
        self.assertFalse(runtime.output_appears(f"started hold {key}", count=3, timeout=0.5))
        self.assertEqual(self.call_on_new_connection(runtime, "release", {"key": key}), (200, True))
        for thread, results in calls:
            thread.join(WAIT_SECONDS)
            # Each call answers the highest number of hold() calls seen running at once.
            self.assertEqual(results, [(200, 2)])
        self.assertEqual(runtime.terminate(), 0)

    def test_async_functions_do_not_wait_for_workers(self):
        runtime = self.start("app", "--concurrency", "1").start_serving()
        key = str(uuid.uuid4())
        thread, results = self.in_background(
            self.call_on_new_connection, runtime, "hold", {"key": key, "tag": "only"})
        runtime.wait_for_output(f"started hold {key} only")
        self.assertEqual(self.call_on_new_connection(runtime, "greet", {"name": "loop"}), (200, "hello loop!"))
        self.call_on_new_connection(runtime, "release", {"key": key})
        thread.join(WAIT_SECONDS)
        self.assertEqual(results, [(200, 1)])
        self.assertEqual(runtime.terminate(), 0)

    @staticmethod
    def call_on_new_connection(runtime, name, arguments):
        connection = runtime.connect()
        try:
            status, _, body = call(connection, name, arguments)
            return status, body
        finally:
            connection.close()


class ShutdownTests(RuntimeCase):
    def test_sigterm_when_idle_exits_0(self):
        runtime = self.start().start_serving()
        self.assertEqual(runtime.terminate(), 0)
        runtime.wait_for_output("drained")

    def test_exit_with_stdin_drains_and_exits_0_when_stdin_closes(self):
        runtime = RuntimeProcess("app", "--exit-with-stdin", stdin=subprocess.PIPE)
        self.addCleanup(runtime.close)
        runtime.start_serving()
        runtime.process.stdin.close()
        self.assertEqual(runtime.wait_for_exit(), 0)
        runtime.wait_for_output("supervisor is gone")

    def test_sigint_exits_0(self):
        runtime = self.start().start_serving()
        runtime.process.send_signal(2)
        self.assertEqual(runtime.wait_for_exit(), 0)

    def test_sigterm_lets_the_call_in_flight_finish_and_refuses_new_calls(self):
        runtime = self.start().start_serving()
        fifo, descriptor = self.make_fifo(runtime)
        idle = runtime.connect()  # opened before the signal, kept alive through it
        self.addCleanup(idle.close)
        self.assertEqual(call(idle, "add", {"a": 1})[0], 200)
        in_flight = runtime.connect()
        self.addCleanup(in_flight.close)
        thread, results = self.in_background(call, in_flight, "read_line", {"path": fifo})
        runtime.wait_for_output(f"started read_line {fifo}")

        runtime.process.terminate()
        runtime.wait_for_output("draining: 1 call(s) in flight")

        status, _, body = call(idle, "add", {"a": 1})
        self.assertEqual((status, body["type"]), (503, "https://runlet.dev/problems#draining"))
        self.assertEqual(call(idle, "healthz", method="GET")[0], 503)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", runtime.port), WAIT_SECONDS).close()
        self.assertIsNone(runtime.process.poll())

        os.write(descriptor, b"finished\n")
        thread.join(WAIT_SECONDS)
        self.assertEqual([result[::2] for result in results], [(200, "finished")])
        self.assertEqual(runtime.wait_for_exit(), 0)

    def test_sigterm_lets_the_stream_in_flight_finish(self):
        runtime = self.start().start_serving()
        fifo, descriptor = self.make_fifo(runtime)
        connection = runtime.connect()
        self.addCleanup(connection.close)
        connection.request("POST", "/stream_line", body=json.dumps({"path": fifo}),
                           headers={"x-runlet-stream": "1"})
        response = connection.getresponse()
        self.assertEqual(response.readline(), b'i"started"\n')

        runtime.process.terminate()
        runtime.wait_for_output("draining: 1 call(s) in flight")
        self.assertIsNone(runtime.process.poll())

        os.write(descriptor, b"last item\n")
        self.assertEqual(response.readline(), b'i"last item"\n')
        self.assertEqual(response.readline(), b"d\n")
        self.assertEqual(response.read(), b"")
        self.assertEqual(runtime.wait_for_exit(), 0)
