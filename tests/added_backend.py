"""A backend added from outside repro, as a plugin would add one: it runs the command in a
subprocess of this machine (as `local` does, more plainly), takes a flag of its own (`--nice N`,
listed in `repro run --help` under its heading) and is registered with
`repro.backends.registry.register`; no other file of repro knows it.

``python -m tests.added_backend <repro arguments>`` is `repro` with it registered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repro.backends import registry
from repro.backends.base import (
    PROJECT_ENV,
    RUNTIME_ENV_DIR,
    BuiltImage,
    Event,
    OnEvent,
    RunResult,
    RunSpec,
    runtime_source,
)
from repro.backends.flags import Flag, FlagSection, Given

NAME = "subprocess"


@dataclass(frozen=True)
class SubprocessOptions:
    """What a run asks of the subprocess: its niceness, added to repro's (0: repro's own)."""

    nice: int = 0


def _flagged(options: object, given: Given) -> SubprocessOptions:
    """The options with the flags given for this run on top."""
    base = options if isinstance(options, SubprocessOptions) else SubprocessOptions()
    return SubprocessOptions(nice=int(given.get("nice", base.nice)))


FLAGS = FlagSection(
    "Subprocess options (with --backend subprocess)",
    (Flag("--nice", "Run the command this much nicer than repro (os.nice).", takes="count", metavar="N"),),
    options=_flagged,
)


class SubprocessBackend:
    """Runs the command with this interpreter, in the run's working directory, waiting for it."""

    name = NAME

    def __init__(self, options: object = None) -> None:
        self.options = options if isinstance(options, SubprocessOptions) else SubprocessOptions()

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        return None

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        argv = [
            sys.executable if a in ("python", "python3") and i == 0 else a for i, a in enumerate(spec.argv)
        ]
        env = {
            **os.environ,
            **spec.env,
            RUNTIME_ENV_DIR: str(spec.runtime_dir),
            PROJECT_ENV: str(spec.project_root),
        }
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in runtime_source())
        for rel in spec.outputs:
            (spec.project_root / rel).mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        nice = self.options.nice
        with spec.stdout_path.open("wb") as out, spec.stderr_path.open("wb") as err:
            code = subprocess.call(
                argv, cwd=spec.project_root / spec.workdir, env=env, stdout=out, stderr=err,
                preexec_fn=(lambda: os.nice(nice)) if nice else None,
            )  # fmt: skip
        for stream, path in (("stdout", spec.stdout_path), ("stderr", spec.stderr_path)):
            on_event(Event("output", stream=stream, data=path.read_bytes()))
        details = {NAME: {"pid_of_repro": os.getpid(), "exit_code": code, "nice": nice}}
        return RunResult(exit_code=code, duration_s=time.monotonic() - start, details=details)


def _shown(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    mine = details.get(NAME)
    return (
        [(NAME, f"exited {mine.get('exit_code')}, run by repro pid {mine.get('pid_of_repro')}")]
        if mine
        else []
    )


ENTRY = registry.Entry(
    NAME, "a subprocess of this machine (a test's backend)", SubprocessBackend,
    on_host=True, in_place=True, interpreter_here=lambda section: True, shown=_shown, flags=FLAGS,
)  # fmt: skip

if __name__ == "__main__":
    registry.register(ENTRY)
    from repro.__main__ import run

    run()
