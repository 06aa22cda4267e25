"""Generators streamed line by line: progress, errors, and the client going away."""

import json
import os
import tempfile
import uuid

from .runtime_process import RuntimeTestCase, call


class StreamTestCase(RuntimeTestCase):
    def open_stream(self, name, arguments):
        self.connection.request("POST", "/" + name, body=json.dumps(arguments), headers={"x-runlet-stream": "1"})
        response = self.connection.getresponse()
        self.assertEqual(response.status, 200)
        self.assertEqual(response.headers["content-type"], "application/x-runlet-stream")
        self.assertEqual(response.headers["transfer-encoding"], "chunked")
        return response

    def assertLines(self, response, *expected):
        for line in expected:
            self.assertEqual(response.readline(), line)

    def assertStreamEnded(self, response):
        self.assertEqual(response.read(), b"")
        # The connection is still usable after a stream.
        self.assertEqual(self.call("add", {"a": 7})[::2], (200, 7))

    def release(self, key):
        """Lets the fixture function waiting on `key` go on; sent on a connection of its own."""
        connection = self.runtime.connect()
        try:
            self.assertEqual(call(connection, "release", {"key": key})[0], 200)
        finally:
            connection.close()


class StreamTests(StreamTestCase):
    def test_sync_generator(self):
        response = self.open_stream("count", {"n": 3})
        self.assertLines(response, b"i0\n", b"i1\n", b"i2\n", b"d\n")
        self.assertStreamEnded(response)

    def test_async_generator(self):
        response = self.open_stream("acount", {"n": 2})
        self.assertLines(response, b'i{"n":0}\n', b'i{"n":1}\n', b"d\n")
        self.assertStreamEnded(response)

    def test_sync_generator_many_items_arrive_whole_and_in_order(self):
        response = self.open_stream("count", {"n": 20000})
        self.assertEqual(response.read().splitlines(), [b"i%d" % number for number in range(20000)] + [b"d"])
        self.assertEqual(self.call("add", {"a": 7})[::2], (200, 7))

    def test_iterator_object(self):
        response = self.open_stream("countdown", {"start": 2})
        self.assertLines(response, b"i2\n", b"i1\n", b"d\n")
        self.assertStreamEnded(response)

    def test_empty_generator(self):
        response = self.open_stream("count", {"n": 0})
        self.assertLines(response, b"d\n")
        self.assertStreamEnded(response)

    def test_sync_generator_items_arrive_as_they_are_produced(self):
        # The second item is produced only after the test, having read the first line, releases it.
        key = str(uuid.uuid4())
        response = self.open_stream("progressive", {"key": key})
        self.assertLines(response, b'i"first"\n')
        self.release(key)
        self.assertLines(response, b'i"second"\n', b"d\n")
        self.assertStreamEnded(response)

    def test_async_generator_items_arrive_as_they_are_produced(self):
        key = str(uuid.uuid4())
        response = self.open_stream("aprogressive", {"key": key})
        self.assertLines(response, b'i"first"\n')
        self.release(key)
        self.assertLines(response, b'i"second"\n', b"d\n")
        self.assertStreamEnded(response)

    def test_sync_generator_raising_ends_with_an_error_line(self):
        response = self.open_stream("fails_midway", {})
        self.assertLines(response, b"i1\n")
        self.assertErrorLine(response, "RuntimeError", "broke after one item")
        self.assertStreamEnded(response)
        self.runtime.wait_for_output("RuntimeError: broke after one item")

    def test_async_generator_raising_ends_with_an_error_line(self):
        response = self.open_stream("afails_midway", {})
        self.assertLines(response, b"i1\n")
        self.assertErrorLine(response, "RuntimeError", "broke after one item")
        self.assertStreamEnded(response)

    def test_unserialisable_item_ends_with_an_error_line_and_closes_the_generator(self):
        response = self.open_stream("yields_unserialisable", {})
        self.assertLines(response, b'i"fine"\n')
        self.assertErrorLine(response, "TypeError", "item of type 'set' is not JSON serialisable")
        self.assertStreamEnded(response)
        self.runtime.wait_for_output("yields_unserialisable closed")

    def test_item_too_deep_to_encode_ends_with_an_error_line(self):
        response = self.open_stream("yields_nested", {"depth": 100_000})
        self.assertLines(response, b'i"fine"\n')
        line = response.readline()
        self.assertEqual(json.loads(line[1:])["type"], "RecursionError")
        self.assertStreamEnded(response)

    def assertErrorLine(self, response, error_type, message):
        line = response.readline()
        self.assertEqual(line[:1], b"e")
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(json.loads(line[1:]), {"type": error_type, "message": message})


class DisconnectTests(StreamTestCase):
    """The client going away mid-stream closes the generator, so its finally blocks run."""

    def setUp(self):
        super().setUp()
        self.marker = os.path.join(tempfile.mkdtemp(prefix="runlet-marker-"), "closed")

    def disconnect_after_first_line(self, name, arguments):
        response = self.open_stream(name, {**arguments, "marker": self.marker})
        self.assertTrue(response.readline().startswith(b"i"))
        self.connection.close()

    def assertGeneratorClosed(self):
        self.runtime.wait_for_output(f"closed {self.marker}")
        with open(self.marker) as file:
            self.assertEqual(file.read(), "closed")

    def test_sync_generator_producing_fast(self):
        self.disconnect_after_first_line("endless", {})
        self.assertGeneratorClosed()

    def test_sync_generator_blocked_in_next(self):
        key = str(uuid.uuid4())
        self.disconnect_after_first_line("stuck", {"key": key})
        self.release(key)
        self.assertGeneratorClosed()

    def test_sync_generator_waits_for_a_client_that_does_not_read(self):
        response = self.open_stream("flood", {"marker": self.marker})
        # Nothing is read: once the buffers on the way are full, the worker must stop pulling items. Without
        # that it would make 64 MiB well within the bound.
        self.assertFalse(self.runtime.output_appears(f"flood made 64 MiB {self.marker}", timeout=1))
        # Reading lets it go on.
        for _ in range(72):
            self.assertEqual(len(response.readline()), (1 << 20) + 4)  # i"…"\n
        self.runtime.wait_for_output(f"flood made 64 MiB {self.marker}")
        self.connection.close()
        self.assertGeneratorClosed()

    def test_async_generator_producing(self):
        self.disconnect_after_first_line("aendless", {})
        self.assertGeneratorClosed()

    def test_async_generator_awaiting_forever(self):
        self.disconnect_after_first_line("astuck", {})
        self.assertGeneratorClosed()
