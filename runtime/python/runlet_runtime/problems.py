"""Problem details (RFC 9457) for requests the runtime refuses before running any user code."""

import json

_TYPE_BASE = "https://runlet.dev/problems/"


class Problem(Exception):
    """A refusal: raised where it is detected, rendered once by the server."""

    def __init__(self, status, code, title, detail, *, extra=None, headers=b""):
        super().__init__(detail)
        self.status = status
        # Raw header lines the response needs besides content-type/length, e.g. b"allow: POST\r\n".
        self.headers = headers
        document = {"type": _TYPE_BASE + code, "title": title, "status": status, "detail": detail}
        if extra:
            document.update(extra)
        self.body = json.dumps(document, separators=(",", ":")).encode()


def function_not_found(module_name, name):
    return Problem(
        404, "function-not-found", "Function not found",
        f"module {module_name!r} has no public function {name!r}",
    )


def invalid_arguments(function_name, missing, unexpected):
    parts = []
    if missing:
        parts.append(f"missing required {_arguments(missing)}")
    if unexpected:
        parts.append(f"got unexpected {_arguments(unexpected)}")
    return Problem(
        422, "invalid-arguments", "Arguments do not match the function",
        f"{function_name}() {' and '.join(parts)}",
        extra={"missing": missing, "unexpected": unexpected},
    )


def _arguments(names):
    noun = "argument" if len(names) == 1 else "arguments"
    return f"{noun} {', '.join(map(repr, names))}"


def invalid_json(reason):
    return Problem(400, "invalid-json", "Body is not valid JSON", f"the request body is not valid JSON: {reason}")


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def body_not_object(value):
    kind = "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
    return Problem(
        400, "body-not-object", "Body is not a JSON object",
        f"the request body must be a JSON object of keyword arguments, not {kind}",
    )


def method_not_allowed(method, allowed):
    return Problem(
        405, "method-not-allowed", "Method not allowed", f"{method} is not allowed here; use {allowed}",
        headers=b"allow: %s\r\n" % allowed.encode(),
    )


def body_too_large(length, limit):
    return Problem(
        413, "body-too-large", "Body too large",
        f"the request body of {length} bytes exceeds the limit of {limit} bytes",
    )


def length_required():
    return Problem(
        411, "length-required", "Length required",
        "request bodies must be sent with Content-Length; Transfer-Encoding is not supported",
    )


def headers_too_large(limit):
    return Problem(
        431, "headers-too-large", "Request headers too large", f"the request head exceeds {limit} bytes",
    )


def malformed_request(reason):
    return Problem(400, "malformed-request", "Malformed request", reason)


# Built once: a draining runtime answers it to every new call.
DRAINING = Problem(
    503, "draining", "Runtime is draining", "the runtime is shutting down and accepts no new calls",
)
