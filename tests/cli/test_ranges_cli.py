"""Seeds, counts and PYTHONHASHSEED take only sane values (repro/ranges.py), whatever brings them.

From a flag, a REPRO_* variable or repro.yaml a bad value is a usage error (exit 2) naming where
it came from, with a hint; from a capsule (a genuine export, its record edited and SHA256SUMS
recomputed) it is exit 6 naming the field, before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_capsule_text_cli import TRAIN
from tests.conftest import Project
from tests.forging import forge

RUN = ["run", "--backend", "local"]


@pytest.fixture
def trained(project: Project) -> Project:
    project.write("train.py", TRAIN)
    project.commit("train")
    return project


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--seed", str(2**80)], {}, ["--seed", "0..4294967295", str(2**80)]),
        (["--seed", "-1"], {}, ["--seed", "0..4294967295"]),
        ([], {"REPRO_SEED_DEFAULT": str(2**32)}, ["REPRO_SEED_DEFAULT", "4294967296"]),
        (["--threads", "100000"], {}, ["--threads", "1..1024"]),
        (["--threads", "0"], {}, ["--threads", "1..1024"]),
        (["--nproc-per-node", "100000"], {}, ["--nproc-per-node", "1..1024"]),
        (["--gpus", "0"], {}, ["--gpus", "1..64"]),
        (["--gpus", "all;touch x"], {}, ["--gpus", "device ids"]),
    ],
)
def test_a_flag_or_variable_out_of_range_is_exit_2_naming_it(
    trained: Project, args: list[str], env: dict[str, str], words: list[str]
) -> None:
    r = trained.repro(*RUN, *args, "--", "python", "train.py", env=env)
    assert r.code == 2, r.out + r.err
    error, *rest = [line for line in r.err.splitlines() if line.strip()]
    assert error.startswith("repro: error:") and all(w in error for w in words), r.err
    assert len(rest) == 1 and rest[0].strip().startswith("hint:"), r.err
    runs = trained.root / ".repro" / "runs"
    assert not runs.is_dir() or not any(runs.iterdir())  # nothing was recorded


@pytest.mark.parametrize(
    ("yaml_text", "words"),
    [
        ("seed: -5\n", ["seed", "repro.yaml"]),
        ("threads: 1000000000\n", ["threads", "1..1024", "repro.yaml"]),
        ("slurm:\n  nodes: 1000000000\n", ["slurm.nodes", "1..4096"]),
        ("store:\n  max_output_bytes: -1\n", ["store.max_output_bytes"]),
    ],
)
def test_a_setting_out_of_range_is_exit_2_naming_the_file(
    trained: Project, yaml_text: str, words: list[str]
) -> None:
    trained.write("repro.yaml", yaml_text)
    r = trained.repro(*RUN, "--", "python", "train.py")
    assert r.code == 2 and all(w in r.err for w in words) and "hint:" in r.err, r.err


def test_the_largest_seed_runs_and_replays(trained: Project) -> None:
    r = trained.repro(*RUN, "--seed", "4294967295", "--json", "--", "python", "train.py")
    assert r.code == 0, r.err
    record = json.loads(trained.repro("show", "latest", "--json").out)
    assert record["seeds"]["master"] == 4294967295 and record["seeds"]["pythonhashseed"] == 4294967295
    assert trained.repro("replay", "latest").code == 0


def test_replay_and_check_counts_out_of_range_are_exit_2(trained: Project) -> None:
    assert trained.repro(*RUN, "--", "python", "train.py").code == 0
    for args in (["replay", "latest", "--nproc-per-node", "5000", "--allow-world-size-change"],
                 ["check", "--runs", "1000", "--", "python", "train.py"],
                 ["check", "--interrupt", "1000", "--", "python", "train.py"],
                 ["replay", "latest", "--atol", "-1"]):  # fmt: skip
        r = trained.repro(*args)
        assert r.code == 2 and "Traceback" not in r.err, (args, r.err)


def _set(path: str, value: Any) -> Any:
    def edit(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = record
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return edit


HOSTILE = [
    ("seeds.master", 2**80, "seeds.master"),
    ("seeds.master", -1, "seeds.master"),
    ("seeds.pythonhashseed", 2**32, "seeds.pythonhashseed"),
    ("seeds.derived.numpy", 2**40, "seeds.derived.numpy"),
    ("command.nproc_per_node", 10**6, "command.nproc_per_node"),
    ("command.nodes", 10**9, "command.nodes"),
    ("command.nodes", 0, "command.nodes"),
    ("env.world_size", 10**12, "env.world_size"),
    ("determinism.threads", 10**9, "determinism.threads"),
    ("determinism.env.OMP_NUM_THREADS", "1000000000", "determinism.env.OMP_NUM_THREADS"),
    ("determinism.env.PYTHONHASHSEED", "-3", "determinism.env.PYTHONHASHSEED"),
    ("env.variables.PYTHONHASHSEED", "99999999999", "env.variables.PYTHONHASHSEED"),
    ("backend.gpus", "0;touch x", "backend.gpus"),
    ("determinism.mode", "strict\nbackend: local", "determinism.mode"),
]


@pytest.mark.parametrize(("field", "value", "named"), HOSTILE)
def test_a_capsule_field_out_of_range_is_exit_6_naming_it(
    trained: Project, tmp_path: Path, field: str, value: Any, named: str
) -> None:
    assert trained.repro(*RUN, "--", "python", "train.py").code == 0
    tar = tmp_path / "genuine.tar"
    assert trained.repro("export", "latest", "-o", str(tar)).code == 0
    bad = forge(tar, tmp_path / "bad.tar", _set(field, value))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (["show", str(bad)], ["verify", str(bad)], ["replay", str(bad)]):
        r = trained.repro(*args, cwd=elsewhere)
        assert r.code == 6 and f"capsule field {named} " in r.err, (args, r.out + r.err)
        assert "Traceback" not in r.err and r.err.count("\n") == 2, r.err
    assert not (elsewhere / ".repro" / "runs").is_dir()  # nothing imported, nothing ran
