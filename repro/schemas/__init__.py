"""The JSON Schemas of repro's machine-readable answers, one file per format, shipped in the package.

Every `--json` answer is one JSON object whose ``format`` is ``repro.<kind>/v1``; ``<kind>.json``
in this folder describes it (JSON Schema 2020-12, ``$id`` ``urn:repro:<kind>/v1``). A reader
checks ``format`` first; a new major version gets a new name, never new meanings under an old one.

    from repro import schemas
    schemas.load("run")            # the schema of `repro run --json`, as a dict
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

# kind → the command(s) that answer with it.
KINDS: dict[str, str] = {
    "ls": "repro ls --json",
    "run": "repro run --json (one run; also --detach)",
    "multirun": "repro run --json with a Hydra multirun (-m): one answer, a run per job",
    "resume": "repro resume --json",
    "replay": "repro replay --json",
    "check": "repro check --json",
    "verify": "repro verify --json",
    "export": "repro export --json",
    "get": "repro get --json",
    "push": "repro push --json",
    "pull": "repro pull --json",
    "lock": "repro lock --json",
    "build": "repro build --json",
    "capsule": "repro show --json (the record itself)",
    "diff": "repro diff --json",
}


def format_name(kind: str) -> str:
    """``repro.<kind>/v1``, the value of ``format`` in an answer of that kind."""
    if kind not in KINDS:
        raise KeyError(kind)
    return f"repro.{kind}/v1"


def answer(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """An answer of ``kind``: ``format`` first, then ``body``."""
    return {"format": format_name(kind), **body}


def load(kind: str) -> dict[str, Any]:
    """The JSON Schema of answers of ``kind``."""
    if kind not in KINDS:
        raise KeyError(kind)
    text = resources.files(__name__).joinpath(f"{kind}.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
