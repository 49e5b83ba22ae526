"""pytest plugin: a reproducibility test for a training project in three lines.

    def test_training_reproduces(repro_check):
        repro_check("python train.py --epochs 1", cwd="training/")

`repro_check` runs the command under repro N times (default 2) with one seed (in strict
mode unless ``mode=``, REPRO_MODE or repro.yaml says otherwise) and fails the test, with
what differs, when the runs do not match; with
``against="golden/capsule.tar"`` it replays a golden capsule against the current code
instead. It returns the `repro.check.CheckResult` on success.

pytest loads this module in every session where repro is installed, so it imports
nothing beyond pytest, the standard library and the list of backends
(`repro.backends.registry`, standard library only) until the fixture is used.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from repro.backends.base import Event
    from repro.check import CheckResult


def pytest_addoption(parser: pytest.Parser) -> None:
    from repro.backends.registry import names

    group = parser.getgroup("repro", "reproducibility checks (repro)")
    group.addoption(
        "--repro-backend",
        default=None,
        choices=names(),
        help="Backend for the repro_check fixture (over REPRO_BACKEND, ini repro_backend and repro.yaml).",
    )
    parser.addini(
        "repro_backend",
        f"Backend for the repro_check fixture: {', '.join(names())} (under REPRO_BACKEND, over repro.yaml).",
        default="",
    )


class ReproCheck:
    """The callable behind the `repro_check` fixture.

    Settings resolve as for `repro check` (`repro.config.resolve`): the fixture's arguments,
    then ``--repro-backend``, are flags; the ini's ``repro_backend`` ranks as a project file.
    """

    def __init__(self, backend: str | None, base: Path, ini_backend: str | None = None) -> None:
        self.backend = backend
        self.ini_backend = ini_backend
        self.base = base

    def __call__(
        self,
        command: str | Sequence[str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        runs: int = 2,
        against: str | os.PathLike[str] | None = None,
        backend: str | None = None,
        seed: int | None = None,
        mode: str | None = None,
        data: Sequence[str] = (),
        outputs: Sequence[str] = (),
        atol: float | None = None,
        rtol: float | None = None,
    ) -> CheckResult:
        """Check that ``command`` reproduces in ``cwd`` (or ``against`` still does); fail the test if not.

        Raises:
            pytest.fail.Exception: not reproduced, the command failed, or repro could not run it.
        """
        from repro import check, config
        from repro.config import Flags, Layer, Rank
        from repro.errors import ReproError
        from repro.run.prepared import RunRequest
        from repro.store.runs import Store

        where = Path(cwd if cwd is not None else self.base).resolve()
        if (command is None) == (against is None):
            pytest.fail("repro_check needs either a command or against=CAPSULE", pytrace=False)

        events: list[Event] = []
        try:
            store = Store.open(where)
            ini = (Layer(Rank.FILE, {"backend": (self.ini_backend, "pytest ini repro_backend")}),)
            flags = Flags(
                backend=backend or self.backend,
                mode=mode,
                seed=seed,
                data=tuple(data),
                outputs=tuple(outputs),
            )
            plan = config.resolve(store.root, flags, extra=ini if self.ini_backend else ())
            if against is not None:
                capsule = where / against  # an absolute `against` stays as it is
                request = check.AgainstRequest(str(capsule), atol=atol, rtol=rtol)
                result = check.run_against(request, store, plan, events.append)
            else:
                argv = shlex.split(command) if isinstance(command, str) else list(command or [])
                run = RunRequest(argv=argv, cwd=where)
                result = check.run_check(run, store, plan, events.append, runs=runs, atol=atol, rtol=rtol)
        except ReproError as e:
            hint = f"\n  hint: {e.hint}" if e.hint else ""
            pytest.fail(f"repro check could not run: {e.message}{hint}", pytrace=False)
        if not result.reproduced:
            pytest.fail(failure_message(result, events), pytrace=False)
        return result


def failure_message(result: CheckResult, events: Sequence[Event] = ()) -> str:
    """Why a check failed, for a test report (rendered by ``repro.ui.check``)."""
    from repro.ui.check import render_failure

    output = b"".join(e.data for e in events if e.kind == "output")
    return render_failure(result, output.decode("utf-8", "replace").splitlines())


@pytest.fixture
def repro_check(request: pytest.FixtureRequest) -> ReproCheck:
    """Check that a training command reproduces under repro; see `ReproCheck.__call__`."""
    config = request.config
    backend = config.getoption("--repro-backend") or None
    ini = str(config.getini("repro_backend") or "") or None
    return ReproCheck(backend, Path(str(request.config.rootpath)), ini)
