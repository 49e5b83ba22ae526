"""repro's own output: -q/-v on every command, colour by NO_COLOR/FORCE_COLOR, one line per build stage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repro import ui
from repro.backends.base import Event
from repro.cli.events import Relay
from repro.cli.lazy import TABLE
from repro.errors import ExitCode
from tests.conftest import Cli


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_command_takes_q_and_v_after_its_name(cli: Cli, tmp_path: Path, name: str) -> None:
    r = cli(name, "--help", cwd=tmp_path)
    assert r.code == 0, r.err
    assert re.search(r"-q, --quiet\s", r.out) and re.search(r"-v, --verbose\s", r.out)


def test_q_before_or_after_the_subcommand_and_never_with_v(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    for args in (("-q", "ls"), ("ls", "-q"), ("ls", "--verbose"), ("-v", "ls")):
        r = cli(*args, cwd=tmp_path)
        assert r.code == 0, (args, r.err)
    both = cli("-q", "ls", "-v", cwd=tmp_path)
    assert both.code == ExitCode.USAGE and "-q/--quiet and -v/--verbose contradict" in both.err
    assert "Traceback" not in both.err
    assert "no runs yet" not in cli("ls", "-q", cwd=tmp_path).err
    # -q is forgotten once the command ended: the next command speaks again.
    assert "repro: no runs yet" in cli("ls", cwd=tmp_path).err


@pytest.mark.parametrize(
    ("no_color", "force_color", "coloured"),
    [(None, None, False), (None, "1", True), ("1", "1", False), ("1", None, False)],
)
def test_repros_colours_follow_no_color_and_force_color(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_color: str | None, force_color: str | None,
    coloured: bool,
) -> None:  # fmt: skip
    for name, value in (("NO_COLOR", no_color), ("FORCE_COLOR", force_color)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    r = cli("show", "nothere", cwd=tmp_path)
    assert r.code == ExitCode.USAGE
    assert ("\x1b[31mrepro: error: \x1b[0m" in r.err) is coloured  # the captured stream is no terminal
    assert r.err.count("repro: error: ") == 1


def _build(relay: Relay, verbose: bool = False) -> None:
    ui.reset()
    ui.verbose = verbose
    relay(Event("build-log", "/store/logs/build.log"))
    relay(Event("stage", "wheels: the lock's wheelhouse"))
    relay(Event("build", "fetching 3 of 3 pinned distributions"))
    relay(Event("stage-end", "wheels: 3 in the lock (1.2 MiB), 3 fetched (1.2 MiB)"))
    relay(Event("stage", "layer 1/1 rest: 3 wheels, 1.2 MiB"))
    for n in range(1, 40):
        relay(Event("build", f"Step {n}/40 : RUN something"))
        relay(Event("build", " ---> Using cache"))


def test_a_build_shows_one_line_per_stage_and_its_raw_lines_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    relay = Relay()
    _build(relay)
    relay(Event("stage-end"))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and "Step" not in err and "--->" not in err
    assert re.fullmatch(
        r"repro: wheels: 3 in the lock \(1\.2 MiB\), 3 fetched \(1\.2 MiB\) · \d+\.\ds", lines[0]
    )
    assert re.fullmatch(r"repro: layer 1/1 rest: 3 wheels, 1\.2 MiB · \d+\.\ds", lines[1])
    _build(relay, verbose=True)
    relay(Event("stage-end"))
    err = capsys.readouterr().err
    assert "  build: Step 39/40 : RUN something" in err and "  build: fetching 3 of 3" in err
    ui.reset()


def test_a_failed_build_shows_its_stages_lines_once_and_where_the_log_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _build(Relay())
    message = "the image build failed: exit 1\nStep 39/40 : RUN something"  # the error repeats its tail
    ui.build_failed(message)
    err = capsys.readouterr().err
    assert "  build: Step 38/40 : RUN something" in err  # the stage's lines, shown on failure
    assert "Step 39/40" not in err  # … but not those the error message shows anyway
    assert "fetching 3 of 3" not in err  # a stage that ended is not the one that failed
    assert err.rstrip().endswith("repro: the full log: /store/logs/build.log")
    ui.reset()


def test_the_commands_stdout_goes_to_stderr_where_stdout_carries_a_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ui.reset()
    Relay()(Event("output", stream="stdout", data=b"epoch 1"))
    Relay(stdout_to_stderr=True)(Event("output", stream="stdout", data=b"epoch 2\n"))
    Relay()(Event("output", stream="stderr", data=b"warn\n"))
    captured = capsys.readouterr()
    assert captured.out == "epoch 1"  # passed on as it came, a partial line too
    assert captured.err == "epoch 2\nwarn\n"
    ui.reset()
