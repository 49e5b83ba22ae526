"""`--isa portable`: its CPU kernel pins reach the training process and its DataLoader workers (local
backend and container), and the weights are the same bits across separate runs and a replay."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.builders import show_json, training_project
from tests.conftest import Project

pytestmark = pytest.mark.slow

PORTABLE = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_CBWR=COMPATIBLE OPENBLAS_CORETYPE=Haswell"
ARGV = ["--", "python", "train.py", "--epochs", "2", "--workers", "2", "--save", "outputs/model.pt",
        "--checkpoint-dir", "outputs/checkpoints"]  # fmt: skip


def _pins_seen(out: str, err: str) -> tuple[set[str], set[str]]:
    """The pins the main process printed (stdout), and those its DataLoader workers printed (stderr,
    every epoch)."""
    main = {
        ln.split(": ", 1)[1].split(" capability=")[0] for ln in out.splitlines() if ln.startswith("main: ")
    }
    started = [ln for ln in err.splitlines() if ln.startswith("worker ")]
    assert len(started) == 4, err  # 2 workers, started each epoch
    return main, {ln.split(": ", 1)[1] for ln in started}


def test_portable_pins_reach_every_process_and_give_the_same_bits_twice(project: Project) -> None:
    training_project(project, "isa_probe.py", points=False, message=None).commit("train")
    digests = []
    for _ in range(2):  # two separate `repro run` processes
        r = project.repro("run", "--backend", "local", "--isa", "portable", *ARGV)
        assert r.code == 0, r.err
        assert _pins_seen(r.out, r.err) == ({PORTABLE}, {PORTABLE})  # the main process and its workers
        digests.append(hashlib.sha256((project.root / "outputs" / "model.pt").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    det = show_json(project)["determinism"]
    assert det["isa"] == "portable" and det["env"]["MKL_CBWR"] == "COMPATIBLE"
    assert det["env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2" and det["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    replay = project.repro("replay", "latest", "--json", env={"REPRO_ISA": "avx2"})  # the record's pin wins
    assert replay.code == 0, replay.out + replay.err
    assert json.loads(replay.out)["status"] == "identical"
    avx2 = project.repro("run", "--backend", "local", "--isa", "avx2", *ARGV)
    assert avx2.code == 0 and "MKL_CBWR=AVX2" in avx2.out


@pytest.mark.docker
def test_portable_pins_reach_the_container(project: Project) -> None:
    training_project(project, "isa_probe.py", points=False, message=None).lock_torch()
    project.commit("train")
    r = project.repro("run", "--backend", "docker", "--isa", "portable", *ARGV)
    assert r.code == 0, r.err
    assert _pins_seen(r.out, r.err) == ({PORTABLE}, {PORTABLE})
    record = show_json(project)
    assert record["backend"]["name"] == "docker" and record["determinism"]["isa"] == "portable"
