"""The reference for the Python runtime: the same function served by FastAPI under uvicorn.

Run as `python3 -m uvicorn fastapi_app:app` from this folder. The function is a plain `def`, like the one the
runtime serves, so FastAPI runs it in its thread pool, as the runtime runs it on a worker thread.
"""

import os
import sys

from fastapi import FastAPI
from pydantic import BaseModel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "trivial"))
import main as trivial  # noqa: E402  (the path above makes the benchmarks' app importable)

app = FastAPI()


class RunArguments(BaseModel):
    name: str = "world"


@app.post("/run")
def run(arguments: RunArguments) -> dict:
    return trivial.run(**arguments.dict())
