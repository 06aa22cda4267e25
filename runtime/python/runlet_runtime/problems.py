"""Problem details (RFC 9457) for requests the runtime refuses before running any user code.

Status and title come from Runlet's one problem catalogue (problem_types.py, generated from crds/problems.ts),
so the runtime and the sidecar answer the same code alike; only the detail is the runtime's own.
"""

import json

from .problem_types import PROBLEM_TYPES, TYPE_BASE


class Problem(Exception):
    """A refusal: raised where it is detected, rendered once by the server."""

    def __init__(self, code, detail, *, extra=None, headers=b""):
        super().__init__(detail)
        status, title = PROBLEM_TYPES[code]
        self.status = status
        # Raw header lines the response needs besides content-type/length, e.g. b"allow: POST\r\n".
        self.headers = headers
        document = {"type": TYPE_BASE + code, "title": title, "status": status, "detail": detail}
        if extra:
            document.update(extra)
        self.body = json.dumps(document, separators=(",", ":")).encode()


def function_not_found(module_name, name):
    return Problem("function-not-found", f"module {module_name!r} has no public function {name!r}")


def invalid_arguments(function_name, missing, unexpected):
    parts = []
    if missing:
        parts.append(f"missing required {_arguments(missing)}")
    if unexpected:
        parts.append(f"got unexpected {_arguments(unexpected)}")
    return Problem(
        "invalid-arguments", f"{function_name}() {' and '.join(parts)}",
        extra={"missing": missing, "unexpected": unexpected},
    )


def _arguments(names):
    noun = "argument" if len(names) == 1 else "arguments"
    return f"{noun} {', '.join(map(repr, names))}"


def invalid_json(reason):
    return Problem("invalid-json", f"the request body is not valid JSON: {reason}")


def json_too_deep():
    # No depth is named: it is the interpreter's (about 1,000 levels on Python 3.11, some 10,000 on 3.13).
    return Problem(
        "json-too-complex",
        "the request body nests arrays or objects deeper than the runtime decodes; flatten it",
    )


def json_integer_too_long(digit_limit):
    return Problem(
        "json-too-complex",
        f"the request body holds an integer of more than {digit_limit} digits, which the runtime does not convert; "
        "send such numbers as strings",
    )


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def body_not_object(value):
    kind = "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
    return Problem(
        "body-not-object", f"the request body must be a JSON object of keyword arguments, not {kind}",
    )


def method_not_allowed(method, allowed):
    return Problem(
        "method-not-allowed", f"{method} is not allowed here; use {allowed}",
        headers=b"allow: %s\r\n" % allowed.encode(),
    )


def body_too_large(length, limit):
    return Problem("body-too-large", f"the request body of {length} bytes exceeds the limit of {limit} bytes")


def length_required():
    return Problem(
        "length-required", "request bodies must be sent with Content-Length; Transfer-Encoding is not supported",
    )


def headers_too_large(limit):
    return Problem("headers-too-large", f"the request head exceeds {limit} bytes")


def from_a_browser():
    return Problem("forbidden", "the runtime takes calls from its sidecar only, not from a web page (Origin or Sec-Fetch-Site sent)")


def internal_error(detail):
    return Problem("internal-error", f"{detail}; the cause is in the runtime's log")


def malformed_request(reason):
    return Problem("malformed-request", reason)


# Built once: a draining runtime answers it to every new call.
DRAINING = Problem("draining", "the runtime is shutting down and accepts no new calls")
