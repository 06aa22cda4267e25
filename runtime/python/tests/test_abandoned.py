"""Calls whose caller went away (the sidecar stopped them at their time limit): their workers are freed, an
`async def` is cancelled, and a runtime with too many calls still running on orphaned threads recycles itself."""

import http.client
import json
import os
import socket
import subprocess
import unittest
import uuid

from .runtime_process import WAIT_SECONDS, RuntimeProcess, call

# How long a call that should be answered at once may take. Shorter than the fixture's own wait (WAIT_SECONDS),
# so a call stuck behind a held worker fails here rather than being answered when the hold times out.
PROMPT_SECONDS = 10

RECYCLE_EXIT_STATUS = 75


class AbandonedCallTests(unittest.TestCase):
    def start(self, *options, stdin=subprocess.DEVNULL):
        runtime = RuntimeProcess("app", *options, stdin=stdin)
        self.addCleanup(runtime.close)
        return runtime.start_serving()

    def abandon(self, runtime, name, arguments, started):
        """Sends a call, waits until its code runs, and closes the connection without reading the answer."""
        body = call_body(arguments)
        client = socket.create_connection(("127.0.0.1", runtime.port), WAIT_SECONDS)
        client.sendall(b"POST /%s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (name.encode(), len(body), body))
        runtime.wait_for_output(started)
        client.close()

    def release(self, runtime, key):
        connection = runtime.connect()
        try:
            self.assertEqual(call(connection, "release", {"key": key})[0], 200)
        finally:
            connection.close()

    def call_promptly(self, runtime, name, arguments):
        connection = runtime.connect()
        connection.timeout = PROMPT_SECONDS
        try:
            status, _, body = call(connection, name, arguments)
            return status, body
        finally:
            connection.close()

    def test_a_call_whose_connection_is_lost_gives_its_worker_back_at_once(self):
        runtime = self.start("--concurrency", "1")
        key = str(uuid.uuid4())
        self.abandon(runtime, "hold", {"key": key, "tag": "abandoned"}, f"started hold {key} abandoned")
        runtime.wait_for_output("hold() abandoned")

        # The only worker is still inside hold(); a new one took its place.
        self.assertEqual(self.call_promptly(runtime, "add", {"a": 2, "b": 3}), (200, 5))
        self.release(runtime, key)
        self.assertEqual(runtime.terminate(), 0)

    def test_an_abandoned_async_call_is_cancelled(self):
        runtime = self.start()
        marker = os.path.join(runtime.workdir, "ablock-closed")
        self.abandon(runtime, "ablock", {"marker": marker}, f"started ablock {marker}")
        runtime.wait_for_output(f"closed {marker}")
        with open(marker) as file:
            self.assertEqual(file.read(), "closed")
        self.assertEqual(runtime.terminate(), 0)

    def test_past_max_orphans_it_recycles_once_the_calls_in_flight_finish(self):
        runtime = self.start("--concurrency", "2", "--max-orphans", "1")
        orphaned = str(uuid.uuid4())
        # The live call reads a FIFO: a draining runtime takes no release() call.
        fifo = os.path.join(runtime.workdir, "fifo")
        os.mkfifo(fifo)
        descriptor = os.open(fifo, os.O_RDWR)
        self.addCleanup(os.close, descriptor)
        in_flight, idle = runtime.connect(), runtime.connect()
        self.addCleanup(in_flight.close)
        self.addCleanup(idle.close)
        self.assertEqual(call(idle, "healthz", method="GET")[0], 200)
        in_flight.request("POST", "/read_line", body=call_body({"path": fifo}))
        runtime.wait_for_output(f"started read_line {fifo}")

        self.abandon(runtime, "hold", {"key": orphaned, "tag": "one"}, f"started hold {orphaned} one")
        self.assertEqual(self.call_promptly(runtime, "add", {"a": 1}), (200, 1))  # one orphan is tolerated
        self.abandon(runtime, "hold", {"key": orphaned, "tag": "two"}, f"started hold {orphaned} two")
        runtime.wait_for_output("recycling the runtime")
        runtime.wait_for_output("draining: 1 call(s) in flight")

        # Meanwhile it says it takes no calls, and still finishes the one in flight.
        self.assertFalse(os.path.exists(runtime.port_file))
        status, _, problem = call(idle, "healthz", method="GET")
        self.assertEqual((status, problem["type"]), (503, "https://runlet.dev/problems#draining"))
        self.assertIsNone(runtime.process.poll())
        os.write(descriptor, b"finished\n")
        response = in_flight.getresponse()
        self.assertEqual((response.status, json.loads(response.read())), (200, "finished"))
        self.assertEqual(runtime.wait_for_exit(), RECYCLE_EXIT_STATUS)

    def test_closed_stdin_stops_the_calls_in_flight_and_exits_at_once(self):
        runtime = self.start("--exit-with-stdin", stdin=subprocess.PIPE)
        key = str(uuid.uuid4())
        in_flight = runtime.connect()
        self.addCleanup(in_flight.close)
        in_flight.request("POST", "/hold", body=call_body({"key": key, "tag": "cut"}))
        runtime.wait_for_output(f"started hold {key} cut")

        runtime.process.stdin.close()
        # Without waiting for hold(), which only the test could release.
        self.assertEqual(runtime.wait_for_exit(timeout=PROMPT_SECONDS), 0)
        with self.assertRaises((ConnectionError, http.client.RemoteDisconnected)):
            in_flight.getresponse()


def call_body(arguments):
    return json.dumps(arguments).encode()


if __name__ == "__main__":
    unittest.main()
