"""The benchmarks' app: a trivial function, and a generator that yields as fast as it can."""

import time


def run(name: str = "world") -> dict:
    return {"greeting": "Hello, " + name + "!"}


def ticks(n: int = 1000):
    # `t` is the wall clock at the yield, so a client can tell how long an item took to reach it.
    for i in range(n):
        yield {"i": i, "t": time.time()}
