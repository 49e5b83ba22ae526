"""Slurm options from any source have a known shape and are quoted in the batch script."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repro import config
from repro.backends.base import RunSpec
from repro.backends.exporters.slurm import slurm_script
from repro.backends.slurm import sbatch
from repro.backends.slurm.options import SlurmOptions
from repro.backends.slurm.script import job_script
from repro.errors import CapsuleInvalid, ConfigError, ExitCode, UsageError
from repro.store.record import Record

INJECTED = "debug\ntouch /tmp/repro-injected"


@pytest.mark.parametrize(
    ("field", "value"),
    [("partition", "gpu"), ("partition", "gpu,cpu-long"), ("account", "lab.1"), ("time", "30"),
     ("time", "00:30:00"), ("time", "2-12"), ("time", "1-00:00:00"), ("time", "UNLIMITED"), ("nodes", 4),
     ("sbatch_args", ["--qos=high", "--mem=16G", "--gres=gpu:a100:2", "--exclusive", "--constraint=a100&ib",
                      "--nodelist=n[1-4],n7", "--hint=nomultithread"])],
)  # fmt: skip
def test_known_shapes_pass(field: str, value: object) -> None:
    assert sbatch.problem(field, value) is None


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("partition", INJECTED, "control character"), ("partition", "gpu;rm", "not a partition"),
     ("partition", "a b", "not a partition"), ("account", "$(id)", "not an account"),
     ("time", "00:30:00\n#SBATCH --uid=0", "control character"), ("time", "soon", "not a Slurm time"),
     ("time", 30, "must be text"), ("nodes", 0, "from 1"), ("nodes", 10**9, "from 1"),
     ("sbatch_args", ["--wrap=id"], "not one repro passes"),
     ("sbatch_args", ["--export=LD_PRELOAD=x"], "not one"),
     ("sbatch_args", ["--output=/etc/x"], "not one"), ("sbatch_args", ["-p", "x"], "--name=value"),
     ("sbatch_args", ["--qos=high\n--uid=0"], "control character"), ("sbatch_args", ["--mem=lots"], "shape"),
     ("sbatch_args", ["--exclusive=all"], "shape"), ("sbatch_args", "--qos=x", "a list"),
     ("environment", "apptainer", "not python, docker, podman")],
)  # fmt: skip
def test_other_shapes_are_refused_with_what_is_wrong(field: str, value: object, said: str) -> None:
    found = sbatch.problem(field, value)
    assert found is not None and said in found, found
    assert "\n" not in found


def test_a_directive_is_quoted_as_sbatch_reads_it_and_never_carries_a_newline() -> None:
    assert sbatch.directive("partition", "gpu") == "#SBATCH --partition=gpu"
    assert sbatch.directive("chdir", "/p/my proj #1") == '#SBATCH --chdir="/p/my proj #1"'
    assert sbatch.directive("job-name", 'a"b\\c') == '#SBATCH --job-name="a\\"b\\\\c"'
    assert sbatch.directive("requeue") == "#SBATCH --requeue"
    with pytest.raises(ValueError):
        sbatch.directive("partition", INJECTED)


def _spec(tmp_path: Path) -> RunSpec:
    return RunSpec(
        argv=["python", "train.py"], project_root=tmp_path / "my proj #1", workdir=".", env={},
        runtime_dir=tmp_path / "rt", stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
    )  # fmt: skip


def test_the_batch_script_refuses_an_injected_option_and_quotes_a_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="control character"):
        job_script(_spec(tmp_path), SlurmOptions(partition=INJECTED), "python", {}, "r1")
    text = job_script(_spec(tmp_path), SlurmOptions(partition="debug"), "python", {}, "r1")
    assert f'#SBATCH --chdir="{tmp_path}/my proj #1"' in text.splitlines()
    assert "touch" not in text and subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_flags_and_the_project_file_are_checked_when_settings_resolve_naming_the_source(
    tmp_path: Path,
) -> None:
    bad = config.Layer(config.Rank.FLAG, {"slurm_partition": (INJECTED, "--partition")})
    with pytest.raises(ConfigError) as caught:
        config.resolve(tmp_path, environ={}).over(bad)
    assert caught.value.exit_code == ExitCode.USAGE and "(from --partition)" in caught.value.message
    (tmp_path / "repro.yaml").write_text("slurm:\n  sbatch_args: ['--wrap=id']\n")
    with pytest.raises(ConfigError, match=r"--wrap is not one repro passes .*\(from repro.yaml\)"):
        config.resolve(tmp_path, environ={})


def test_an_exported_batch_script_of_a_forged_record_is_refused(tmp_path: Path) -> None:
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.backend.details = {"slurm": {"options": {"partition": INJECTED}}}
    with pytest.raises(CapsuleInvalid, match="control character"):
        slurm_script(record)
    record.backend.details = {"slurm": {"options": {"partition": "gpu", "sbatch_args": ["--qos=high"]}}}
    lines = slurm_script(record).splitlines()
    assert "#SBATCH --partition=gpu" in lines and "#SBATCH --qos=high" in lines
