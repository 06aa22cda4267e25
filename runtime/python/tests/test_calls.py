"""Calls answered with one JSON body: results, errors, refusals, and the HTTP framing around them."""

import functools
import json
import socket
import threading
import uuid

from .runtime_process import WAIT_SECONDS, RuntimeTestCase, call


class ResultTests(RuntimeTestCase):
    def test_sync_function_result(self):
        status, headers, body = self.call("add", {"a": 2, "b": 3})
        self.assertEqual((status, body), (200, 5))
        self.assertEqual(headers["content-type"], "application/json")

    def test_async_function_result(self):
        self.assertEqual(self.call("greet", {"name": "Ada"})[::2], (200, "hello Ada!"))

    def test_empty_body_means_no_arguments(self):
        status, _, body = self.call("echo", body=b"")
        self.assertEqual((status, body), (200, {}))

    def test_non_ascii_round_trip(self):
        status, _, body = self.call("echo", {"text": "héllo ✓"})
        self.assertEqual((status, body), (200, {"text": "héllo ✓"}))

    def test_generator_not_streamed_answers_the_list(self):
        self.assertEqual(self.call("count", {"n": 3})[::2], (200, [0, 1, 2]))

    def test_async_generator_not_streamed_answers_the_list(self):
        self.assertEqual(self.call("acount", {"n": 2})[::2], (200, [{"n": 0}, {"n": 1}]))

    def test_iterator_object_not_streamed_answers_the_list(self):
        self.assertEqual(self.call("countdown", {"start": 3})[::2], (200, [3, 2, 1]))

    def test_stream_asked_of_a_plain_result_answers_json(self):
        status, headers, body = self.call("add", {"a": 1}, headers={"x-runlet-stream": "1"})
        self.assertEqual((status, body), (200, 1))
        self.assertEqual(headers["content-type"], "application/json")

    def test_health(self):
        status, _, body = self.call("healthz", method="GET")
        self.assertEqual((status, body), (200, {"status": "ok"}))


class FunctionErrorTests(RuntimeTestCase):
    def test_function_raising_answers_500_and_logs_the_traceback(self):
        request_id = f"run-{uuid.uuid4()}"
        status, headers, body = self.call("fail", {"message": "bad input"}, headers={"x-request-id": request_id})
        self.assertEqual((status, body), (500, {"type": "ValueError", "message": "bad input"}))
        self.assertEqual(headers["content-type"], "application/json")
        self.runtime.wait_for_output(f"fail() raised (request {request_id})")
        self.runtime.wait_for_output("ValueError: bad input")

    def test_unserialisable_result_names_its_type(self):
        status, _, body = self.call("unserialisable", {})
        self.assertEqual(status, 500)
        self.assertEqual(body, {"type": "TypeError", "message": "result of type 'set' is not JSON serialisable"})

    def test_unserialisable_value_inside_the_result_names_its_type(self):
        status, _, body = self.call("nested_unserialisable", {})
        self.assertEqual(status, 500)
        self.assertEqual(body["type"], "TypeError")
        self.assertIn("'object'", body["message"])

    def test_nan_is_refused(self):
        status, _, body = self.call("not_a_number", {})
        self.assertEqual(status, 500)
        self.assertEqual(body, {"type": "ValueError",
                                "message": "result contains NaN or Infinity, which JSON cannot represent"})

    def test_result_too_deep_to_encode_is_the_call_s_500_and_the_connection_serves_on(self):
        status, _, body = self.call("nested", {"depth": 100_000})
        self.assertEqual(status, 500)
        self.assertEqual(body["type"], "RecursionError")
        self.assertIn("result cannot be encoded as JSON", body["message"])
        sock = self.connection.sock
        self.assertEqual(self.call("add", {"a": 1})[::2], (200, 1))
        self.assertIs(self.connection.sock, sock)

    def test_integer_too_long_to_encode_is_the_call_s_500(self):
        status, _, body = self.call("big_integer", {"digits": 1_000_000})
        self.assertEqual(status, 500)
        self.assertEqual(body["type"], "ValueError")
        self.assertIn("result cannot be encoded as JSON", body["message"])
        self.assertEqual(self.call("add", {"a": 1})[::2], (200, 1))


class JsonBeyondLimitsTests(RuntimeTestCase):
    """Valid JSON that Python will not decode: refused with 400, and the connection and runtime serve on."""

    def assertRefusedAndServingOn(self, body):
        status, headers, problem = self.call("echo", body=body)
        self.assertEqual(status, 400, "a body beyond the limits was decoded")
        self.assertEqual(headers["content-type"], "application/problem+json")
        self.assertEqual(problem["type"], "https://runlet.dev/problems#json-too-complex")
        sock = self.connection.sock
        self.assertEqual(self.call("add", {"a": 1})[::2], (200, 1))
        self.assertIs(self.connection.sock, sock)
        return problem["detail"]

    def test_arrays_nested_100_000_deep(self):
        detail = self.assertRefusedAndServingOn(b"[" * 100_000 + b"]" * 100_000)
        self.assertIn("deeper than the runtime decodes", detail)

    def test_objects_nested_100_000_deep(self):
        self.assertRefusedAndServingOn(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)

    def test_an_integer_of_a_million_digits(self):
        detail = self.assertRefusedAndServingOn(b'{"a":' + b"1" * 1_000_000 + b"}")
        self.assertIn("send such numbers as strings", detail)

    def test_the_check_of_an_async_call_refuses_it_alike(self):
        status, _, problem = self.call("echo", body=b"[" * 100_000 + b"]" * 100_000,
                                       headers={"x-runlet-validate": "1"})
        self.assertEqual((status, problem["type"]), (400, "https://runlet.dev/problems#json-too-complex"))

    def test_nesting_within_the_limit_is_decoded(self):
        self.assertEqual(self.call("echo", body=b'{"a":' + b"[" * 100 + b"]" * 100 + b"}")[::2],
                         (200, {"a": functools.reduce(lambda inner, _: [inner], range(99), [])}))


class RuntimeFaultTests(RuntimeTestCase):
    def test_a_fault_preparing_a_call_is_answered_500_and_the_connection_serves_on(self):
        status, headers, problem = self.call("odd_callable", {})
        self.assertEqual(status, 500)
        self.assertEqual(headers["content-type"], "application/problem+json")
        self.assertEqual(problem["type"], "https://runlet.dev/problems#internal-error")
        self.runtime.wait_for_output("RuntimeError: no signature here")
        sock = self.connection.sock
        self.assertEqual(self.call("add", {"a": 1})[::2], (200, 1))
        self.assertIs(self.connection.sock, sock)


class RefusalTests(RuntimeTestCase):
    options = ("--max-body-bytes", "1024")

    def assertProblem(self, response, status, code):
        actual_status, headers, body = response
        self.assertEqual(actual_status, status, body)
        self.assertEqual(headers["content-type"], "application/problem+json")
        self.assertEqual(body["type"], f"https://runlet.dev/problems#{code}")
        self.assertEqual(body["status"], status)
        self.assertTrue(body["title"] and body["detail"])
        return body

    def test_unknown_function(self):
        body = self.assertProblem(self.call("nonexistent", {}), 404, "function-not-found")
        self.assertIn("'nonexistent'", body["detail"])

    def test_private_function(self):
        self.assertProblem(self.call("_private", {}), 404, "function-not-found")

    def test_attribute_that_is_not_a_function(self):
        self.assertProblem(self.call("NOT_A_FUNCTION", {}), 404, "function-not-found")

    def test_class(self):
        self.assertProblem(self.call("Model", {}), 404, "function-not-found")

    def test_missing_and_unexpected_arguments(self):
        body = self.assertProblem(self.call("add", {"b": 1, "c": 2, "d": 3}), 422, "invalid-arguments")
        self.assertEqual((body["missing"], body["unexpected"]), (["a"], ["c", "d"]))
        self.assertIn("'a'", body["detail"])
        self.assertIn("'c', 'd'", body["detail"])

    def test_keyword_only_argument_binds_and_positional_name_is_unexpected(self):
        self.assertEqual(self.call("greet", {"name": "Bo", "punctuation": "?"})[2], "hello Bo?")
        body = self.assertProblem(self.call("greet", {"nom": "Bo"}), 422, "invalid-arguments")
        self.assertEqual((body["missing"], body["unexpected"]), (["name"], ["nom"]))

    def test_invalid_json(self):
        self.assertProblem(self.call("add", body=b'{"a": 1'), 400, "invalid-json")

    def test_body_not_utf8(self):
        self.assertProblem(self.call("add", body=b'{"a": "\xff"}'), 400, "invalid-json")

    def test_body_not_an_object(self):
        body = self.assertProblem(self.call("add", body=b"[1, 2]"), 400, "body-not-object")
        self.assertIn("array", body["detail"])

    def test_body_too_large_keeps_the_connection(self):
        body = self.assertProblem(
            self.call("echo", body=json.dumps({"text": "x" * 300_000})), 413, "body-too-large")
        self.assertIn("1024", body["detail"])
        sock = self.connection.sock
        self.assertEqual(self.call("add", {"a": 1})[::2], (200, 1))
        self.assertIs(self.connection.sock, sock)

    def test_method_other_than_post(self):
        status, headers, _ = response = self.call("add", method="GET")
        self.assertProblem(response, 405, "method-not-allowed")
        self.assertEqual(headers["allow"], "POST")

    def test_method_on_unknown_function_is_not_found(self):
        self.assertProblem(self.call("nonexistent", method="GET"), 404, "function-not-found")

    def test_chunked_request_is_refused_and_closes(self):
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            sock.sendall(b"POST /add HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            status, headers, body = read_response(sock.makefile("rb"))
            self.assertEqual(status, 411)
            self.assertEqual(json.loads(body)["type"], "https://runlet.dev/problems#length-required")
            self.assertEqual(sock.recv(1), b"")

    def test_malformed_request_answers_400_and_closes(self):
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            sock.sendall(b"NONSENSE\r\n\r\n")
            status, _, body = read_response(sock.makefile("rb"))
            self.assertEqual(status, 400)
            self.assertEqual(json.loads(body)["type"], "https://runlet.dev/problems#malformed-request")
            self.assertEqual(sock.recv(1), b"")

    def test_oversized_head_answers_431(self):
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            sock.sendall(b"POST /add HTTP/1.1\r\nx-filler: " + b"x" * 70000 + b"\r\n\r\n")
            self.assertEqual(read_response(sock.makefile("rb"))[0], 431)


class ConnectionTests(RuntimeTestCase):
    def test_keep_alive_serves_several_requests_on_one_connection(self):
        self.assertEqual(self.call("add", {"a": 0})[::2], (200, 0))
        sock = self.connection.sock
        for number in range(1, 6):
            self.assertEqual(self.call("add", {"a": number, "b": 1})[::2], (200, number + 1))
            self.assertIs(self.connection.sock, sock)

    def test_pipelined_requests_are_answered_in_order(self):
        key = str(uuid.uuid4())
        first = json.dumps({"key": key, "tag": "pipelined"}).encode()
        second = b'{"name":"second"}'
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            # The first call blocks until released; the second, an async function, would finish first if the
            # runtime answered a connection's requests out of order.
            sock.sendall(
                b"POST /hold HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (len(first), first)
                + b"POST /greet HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (len(second), second)
            )
            self.runtime.wait_for_output(f"started hold {key} pipelined")
            self.assertEqual(self.call("release", {"key": key})[0], 200)
            responses = sock.makefile("rb")
            status, _, body = read_response(responses)
            self.assertEqual(status, 200)
            self.assertIsInstance(json.loads(body), int)
            self.assertEqual(read_response(responses)[::2], (200, b'"hello second!"'))

    def test_expect_100_continue_gets_the_go_ahead(self):
        body = b'{"a":20,"b":22}'
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            responses = sock.makefile("rb")
            sock.sendall(b"POST /add HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: %d\r\n\r\n" % len(body))
            self.assertEqual(responses.readline(), b"HTTP/1.1 100 Continue\r\n")
            self.assertEqual(responses.readline(), b"\r\n")
            sock.sendall(body)
            self.assertEqual(read_response(responses)[::2], (200, b"42"))

    def test_connection_close_is_honoured(self):
        with socket.create_connection(("127.0.0.1", self.runtime.port), WAIT_SECONDS) as sock:
            sock.sendall(b"POST /add HTTP/1.1\r\nconnection: close\r\ncontent-length: 7\r\n\r\n{\"a\":1}")
            status, headers, body = read_response(sock.makefile("rb"))
            self.assertEqual((status, headers["connection"], body), (200, "close", b"1"))
            self.assertEqual(sock.recv(1), b"")

    def test_many_connections_at_once(self):
        results = []

        def client(number):
            connection = self.runtime.connect()
            try:
                for _ in range(20):
                    results.append(call(connection, "add", {"a": number, "b": 1})[2] == number + 1)
            finally:
                connection.close()

        threads = [threading.Thread(target=client, args=(number,)) for number in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_SECONDS)
        self.assertEqual(results, [True] * 160)


class ExportedNamesTests(RuntimeTestCase):
    app = "exported"

    def test_only_names_in_dunder_all_are_served(self):
        self.assertEqual(self.call("run", {})[::2], (200, "ran"))
        self.assertEqual(self.call("helper", {})[0], 404)


def read_response(file):
    """(status, headers, body) of one Content-Length response read from a socket file."""
    status = int(file.readline().split()[1])
    headers = {}
    while (line := file.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, file.read(int(headers.get("content-length", 0)))


class ValidateOnlyTests(RuntimeTestCase):
    """`x-runlet-validate: 1`: the sidecar's check of an async call before its 202; nothing runs."""

    def test_a_call_that_would_run_is_valid_and_does_not_run(self):
        # fail() raises when it runs: a 200 proves it did not.
        status, _, body = self.call("fail", {"message": "x"}, headers={"x-runlet-validate": "1"})
        self.assertEqual((status, body), (200, {"valid": True}))

    def test_a_call_that_would_be_refused_gets_its_problem(self):
        status, _, body = self.call("nope", {}, headers={"x-runlet-validate": "1"})
        self.assertEqual(status, 404)
        self.assertEqual(body["type"], "https://runlet.dev/problems#function-not-found")
        status, _, body = self.call("add", {"c": 1}, headers={"x-runlet-validate": "1"})
        self.assertEqual(status, 422)
        self.assertEqual(body["unexpected"], ["c"])
