"""The hello app: a greeting, a stream of numbered items, and a function that fails.

Run it with `make dev`, then:
  curl -X POST localhost:8080/v4/dev/hello/run -H 'content-type: application/json' -d '{"name":"Ada"}'
  curl -N -X POST localhost:8080/v4/dev/hello/count -H 'accept: text/event-stream' -d '{"n":5}'
"""
import time


def run(name: str) -> dict:
    return {"greeting": f"Hello, {name}!"}


def count(n: int, pause: float = 0.5):
    """Yields n numbered items, pausing between them, so a stream shows them arriving one by one."""
    for i in range(1, n + 1):
        yield {"item": i, "of": n}
        if i < n:
            time.sleep(pause)


def fail(message: str = "something went wrong"):
    raise ValueError(message)
