"""JSON encoding of what a call sends back: results, stream items and errors."""

import json

# What encode_value raises; callers catch exactly these to answer "cannot be encoded".
ENCODING_ERRORS = (TypeError, ValueError, RecursionError)


class _Refused(TypeError):
    """Carries the value the encoder could not handle, so the message can name its type."""

    def __init__(self, value):
        super().__init__()
        self.value = value


def _refuse(value):
    raise _Refused(value)


# One encoder for the process: json.dumps with non-default options would build a new one per call.
_encode = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_refuse,
).encode


def encode_value(value, what):
    """The compact UTF-8 JSON of value; `what` ("result", "item") names it in the error raised otherwise."""
    try:
        return _encode(value).encode()
    except _Refused as refused:
        kind = type(refused.value).__name__
        if refused.value is value:
            message = f"{what} of type {kind!r} is not JSON serialisable"
        else:
            message = f"{what} contains a value of type {kind!r}, which is not JSON serialisable"
        raise TypeError(message) from None
    except UnicodeEncodeError:
        raise ValueError(f"{what} contains a lone surrogate, which is not valid Unicode") from None
    except ValueError as error:
        if str(error).startswith("Out of range float values"):
            raise ValueError(f"{what} contains NaN or Infinity, which JSON cannot represent") from None
        raise ValueError(f"{what} cannot be encoded as JSON: {error}") from None
    except (TypeError, RecursionError) as error:
        raise type(error)(f"{what} cannot be encoded as JSON: {error}") from None


def error_body(error):
    """`{"type", "message"}` of an exception; ASCII-escaped, so any message can be encoded."""
    return json.dumps(
        {"type": type(error).__name__, "message": _message(error)}, separators=(",", ":"),
    ).encode()


def _message(error):
    try:
        return str(error)
    except Exception:
        return f"<unprintable {type(error).__name__}>"
