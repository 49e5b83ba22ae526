"""`repro resume`: real training SIGKILLed at a random point after a checkpoint, resumed, compared bytewise.

Everything is killed — the repro process, the training command, its DataLoader workers,
torchrun and its ranks — as a preempted node would; the resumed run's model must equal
the uninterrupted run's, byte for byte (strict mode, CPU). Kept small (a few epochs, 2
workers: the CI machine has 2 cores), but each test leaves its training more to do after
the first checkpoint than the kill's random delay, so the kill always lands mid-training.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.backends.local import run_processes
from repro.collect.checkpoints import lightning_loops
from tests.conftest import Project

pytestmark = pytest.mark.slow

IGNORED = "outputs/\ncheckpoints/\nmodel.pt\n"


def resumable_project(project: Project, script: str) -> None:
    project.script(script, "train.py")
    project.points(n=32)
    project.write(".gitignore", IGNORED)
    project.commit("train")


def _states(root: Path) -> list[Path]:
    """RNG states the runtime recorded under their checkpoint's hash, in the run being executed."""
    found = root.glob(".repro/runs/*/work/runtime/rng/*.rank*.json")
    return [p for p in found if not p.name.startswith("stat-")]


def kill_after_checkpoint(
    project: Project, args: list[str], states: int = 1, within: float = 0.3, log: Path | None = None
) -> str:
    """Start `repro run ARGS`, wait for a checkpoint's states, wait a random moment, SIGKILL everything.

    The moment is drawn from [0, WITHIN) seconds; a test gives its training more than that
    (and the poll's latency on a loaded machine) to go after its first checkpoint, and the
    helper fails loudly if the training had ended before the kill, rather than testing a
    resume of a finished run. With ``log``, repro's stdout and stderr go to that file, as
    `repro run … > train.out 2>&1 &` sends them.
    """
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "run", *args], cwd=project.root, start_new_session=True,
        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    if log is not None:
        os.close(out)  # the child holds its own descriptor
    deadline = time.monotonic() + 300
    while len(_states(project.root)) < states:
        assert proc.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint state after 300 s"
        time.sleep(0.02)
    time.sleep(random.uniform(0.0, within))
    (run_dir,) = [p for p in (project.root / ".repro" / "runs").iterdir() if (p / "work").is_dir()]
    os.killpg(proc.pid, signal.SIGKILL)  # repro itself
    proc.wait()
    finished = (project.root / "model.pt").exists()
    while victims := run_processes(run_dir.name):  # the command's group, its workers, torchrun ranks
        for pid in victims:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    assert not finished, "the training ended before the kill: give it more to do after its first checkpoint"
    return run_dir.name


def _fresh(project: Project) -> bytes:
    """The uninterrupted run's model, and a project with no checkpoint left for the next run."""
    model = (project.root / "model.pt").read_bytes()
    (project.root / "model.pt").unlink()
    for p in (project.root / "checkpoints").iterdir():
        p.unlink()
    return model


def test_a_run_killed_with_its_repro_process_resumes_bit_identical(project: Project) -> None:
    resumable_project(project, "resumable_train.py")
    args = ["--backend", "local", "--seed", "7", "--data", "data",
            "--", "python", "train.py", "--epochs=5", "--epoch-sleep=0.5"]  # fmt: skip
    assert project.repro("run", *args).code == 0
    reference = _fresh(project)

    killed = kill_after_checkpoint(project, args, within=0.8)  # in the pause after a checkpoint, or after it
    r = project.repro("resume", "latest", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["resumed_from"] == killed
    assert "never sealed" in r.err and "=> resuming from checkpoints/last.pt" in r.err
    assert "not exact" not in r.err
    assert (project.root / "model.pt").read_bytes() == reference

    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert [(r["status"], r["kind"], r["parent"]) for r in rows[1:]] == [
        ("interrupted", "run", None),
        ("succeeded", "resume", killed),
    ]
    assert f"(resume of {killed})" in project.repro("ls").out
    shown = project.repro("show", "latest").out
    assert f"resume of {killed}" in shown and "checkpoints/last.pt (step " in shown

    r = project.repro("replay", "latest", "--json")  # the chain, replayed as one uninterrupted run
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical"
    assert any(f"{killed} → " in note and "one uninterrupted run" in note for note in verdict["notes"])


def test_a_run_whose_output_the_shell_sends_to_a_file_in_the_project_resumes(project: Project) -> None:
    """`repro run … > train.out 2>&1 &`: the log grows in the project while the run is captured and
    killed; it is repro's own output, never code, so the resume is not refused for it. A note edited
    meanwhile (tracked, never read by the run) does not stop it either; a changed module would."""
    resumable_project(project, "resumable_train.py")
    project.write("NOTES.md", "lr sweep next\n")
    project.commit("notes")
    args = ["--backend", "local", "--seed", "7", "--data", "data",
            "--", "python", "train.py", "--epochs=5", "--epoch-sleep=0.5"]  # fmt: skip
    assert project.repro("run", *args).code == 0
    reference = _fresh(project)

    log = project.root / "train.out"
    killed = kill_after_checkpoint(project, args, within=0.8, log=log)
    assert "repro: run " in log.read_text() and log.stat().st_size > 0
    with open(log, "a") as f:  # the shell's file keeps growing (another job writes to it)
        f.write("more output\n")
    project.write("NOTES.md", "lr sweep next; then a wider model\n")
    r = project.repro("resume", "latest", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["resumed_from"] == killed
    assert (project.root / "model.pt").read_bytes() == reference
    code = json.loads(project.repro("show", killed, "--json").out)["code"]
    assert "train.out" not in [f["path"] for f in code["files"]] and not code["dirty"]
    assert "train.py" in code["read"] and "NOTES.md" not in code["read"]

    _fresh(project)
    project.write("helper.py", "x = 1\n")  # a module the resumed code could import, changed: refused
    again = kill_after_checkpoint(project, args, within=0.8, log=log)
    (project.root / "helper.py").write_text("x = 2\n")
    refused = project.repro("resume", again)
    assert refused.code == 2 and "the code changed since run" in refused.err, refused.err


def test_two_torchrun_ranks_killed_resume_bit_identical(project: Project) -> None:
    resumable_project(project, "ddp_resumable.py")
    project.points(n=1024)  # 128 steps a rank an epoch: the kill lands before the last epoch
    project.commit("more points")
    args = ["--backend", "local", "--seed", "7", "--data", "data", "--nproc-per-node", "2",
            "--", "python", "train.py", "--epochs", "6"]  # fmt: skip
    assert project.repro("run", *args).code == 0
    reference = _fresh(project)

    killed = kill_after_checkpoint(project, args, states=2)  # both ranks' states of the first checkpoint
    r = project.repro("resume", killed)
    assert r.code == 0, r.err
    assert "rank 0: resumed at epoch" in r.out and "rank 1: resumed at epoch" in r.out
    assert "not exact" not in r.err
    assert (project.root / "model.pt").read_bytes() == reference


def test_a_killed_lightning_fit_resumed_from_last_ckpt_is_bit_identical(project: Project) -> None:
    """Lightning saves through a byte buffer and fsspec and loads through its own `_load`: still exact."""
    resumable_project(project, "lightning_resumable.py")
    args = ["--backend", "local", "--seed", "7", "--data", "data",
            "--", "python", "train.py", "--epoch-sleep=1"]  # fmt: skip
    assert project.repro("run", *args).code == 0
    reference = _fresh(project)

    killed = kill_after_checkpoint(project, args, within=0.5)
    r = project.repro("resume", killed)
    assert r.code == 0, r.err
    assert "Restored all states from the checkpoint at checkpoints/last.ckpt" in r.err
    assert "not exact" not in r.err
    assert (project.root / "model.pt").read_bytes() == reference
    # Lightning's own loop counters are Lightning's: said at the end of the resume, and in `repro show`
    note = lightning_loops(exact=True)
    assert f"repro: warning: {note}" in r.err.splitlines(), r.err[-2000:]
    shown = json.loads(project.repro("show", "latest", "--json").out)
    assert {"code": "resume_lightning_loops", "message": note} in shown["warnings"]
    assert note in project.repro("show", "latest").out


def readme_example() -> str:
    """The complete mid-epoch script the README documents, exactly as written there."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    return readme.split("<!-- mid-epoch example -->\n```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_mid_epoch_example_resumes_exactly_from_a_kill_mid_epoch(project: Project) -> None:
    project.write("train.py", readme_example())
    project.points(n=32)  # 4 batches an epoch, a checkpoint every 3 steps: in the middle of epochs
    project.write(".gitignore", IGNORED)
    project.commit("mid-epoch example")
    args = ["--backend", "local", "--seed", "7", "--data", "data", "--", "python", "train.py", "--epochs=16"]
    assert project.repro("run", *args).code == 0
    reference = _fresh(project)

    kill_after_checkpoint(project, args)
    r = project.repro("resume", "latest")
    assert r.code == 0, r.err
    resumed_at = (r.out + r.err).split("=> resuming at epoch ", 1)[1].split("\n", 1)[0]
    assert not resumed_at.endswith("batch 0"), resumed_at  # inside an epoch
    assert (project.root / "model.pt").read_bytes() == reference


def test_a_window_of_a_traced_run_replays_identical_from_its_middle_checkpoint(project: Project) -> None:
    resumable_project(project, "resumable_train.py")
    r = project.repro("run", "--trace", "--backend", "local", "--seed", "7", "--data", "data",
                      "--", "python", "train.py", "--epochs=3")  # fmt: skip
    assert r.code == 0, r.err
    shown = project.repro("show", "latest").out
    assert "checkpoints/last.pt (step 4, RNG states of 1 process, file kept)" in shown
    r = project.repro("replay", "latest", "--from", "step:4", "--steps", "4", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical"
    assert "4 of the window's 4 steps compared by their parameter fingerprints" in verdict["notes"]
    assert "window: optimizer steps 4..7, from checkpoint checkpoints/last.pt" in verdict["notes"]
