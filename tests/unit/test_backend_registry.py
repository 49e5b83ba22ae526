"""The backend registry: one list of backends, each owning its settings section, its options and its
replay layout; the settings, the runner, the sandbox and the pytest plugin all read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repro import config
from repro.backends import registry
from repro.backends.base import Event
from repro.backends.local import LocalBackend
from repro.backends.slurm.backend import SlurmBackend
from repro.backends.slurm.options import SlurmOptions
from repro.errors import CapsuleInvalid, ConfigError, ExitCode
from repro.run.execute import select_backend
from repro.store.record import Record


def test_the_names_the_settings_accept_are_the_registrys(tmp_path: Path) -> None:
    assert registry.names() == ("auto", "local", "docker", "podman", "slurm")
    assert registry.names() == (registry.AUTO, *(entry.name for entry in registry.ENTRIES))
    (tmp_path / "repro.yaml").write_text("backend: kubernetes\n")
    with pytest.raises(ConfigError) as caught:
        config.load(tmp_path, environ={})
    assert caught.value.hint == "choose one of: auto, local, docker, podman, slurm"
    assert "(from repro.yaml)" in caught.value.message


def test_a_backends_section_of_repro_yaml_becomes_its_options(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text(
        "slurm:\n  nodes: 2\n  partition: gpu\n  time: '00:30:00'\n  sbatch_args: ['--qos=high']\n"
        "  requeue: true\n  environment: docker\n"
    )
    settings = config.load(tmp_path, environ={})
    assert settings.section("slurm") == {
        "nodes": 2, "partition": "gpu", "time": "00:30:00", "account": None,
        "sbatch_args": ("--qos=high",), "requeue": True, "environment": "docker",
    }  # fmt: skip
    options = registry.options("slurm", settings.section)
    assert options == SlurmOptions(2, "gpu", "00:30:00", None, ("--qos=high",), True, "docker")
    assert registry.get("local").settings() == {} and "slurm.requeue" in registry.get("slurm").settings()


@pytest.mark.parametrize(
    ("yaml", "said", "hint"),
    [
        ("slurm:\n  partition: 'gpu;rm'\n", "Slurm: partition 'gpu;rm' is not a partition", "see README"),
        (
            "slurm:\n  environment: apptainer\n",
            "unknown slurm.environment 'apptainer'",
            "choose one of: python, docker, podman",
        ),
        ("slurm:\n  queue: gpu\n", "unknown setting 'slurm.queue'", "did you mean"),
    ],
)
def test_a_backends_section_is_checked_by_its_own_rule(
    tmp_path: Path, yaml: str, said: str, hint: str
) -> None:
    (tmp_path / "repro.yaml").write_text(yaml)
    with pytest.raises(ConfigError) as caught:
        config.load(tmp_path, environ={})
    assert caught.value.exit_code == ExitCode.USAGE
    assert said in caught.value.message and (caught.value.hint or "").startswith(hint), caught.value
    assert "(from repro.yaml)" in caught.value.message or "unknown setting" in caught.value.message


def _record(options: dict[str, object], nodes: int = 2) -> Record:
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv, record.command.nodes = ["python", "train.py"], nodes
    record.backend.name = "slurm"
    record.backend.details = {"slurm": {"options": options}}
    return record


def test_slurm_options_go_into_the_record_and_come_back_from_it() -> None:
    asked = SlurmOptions(nodes=2, partition="gpu", time="01:00:00", sbatch_args=("--mem=16G",), requeue=True)
    again = SlurmOptions.recorded(_record(asked.as_dict(), nodes=2))
    assert again == asked and isinstance(again.sbatch_args, tuple)
    assert SlurmOptions.recorded(_record({}, nodes=3)) == SlurmOptions(nodes=3)  # a record without options


@pytest.mark.parametrize(
    "forged",
    [{"partition": "debug\ntouch /tmp/x"}, {"sbatch_args": ["--wrap=id"]}, {"sbatch_args": "--qos=x"},
     {"environment": "apptainer"}],
)  # fmt: skip
def test_forged_slurm_options_in_a_record_are_refused(forged: dict[str, object]) -> None:
    with pytest.raises(CapsuleInvalid) as caught:
        SlurmOptions.recorded(_record(forged))
    assert (
        caught.value.exit_code == ExitCode.CAPSULE_INVALID
        and "the recorded Slurm options" in caught.value.message
    )


def test_selecting_a_backend_looks_it_up() -> None:
    events: list[Event] = []
    assert isinstance(select_backend("local", events.append), LocalBackend)
    options = SlurmOptions(nodes=2, partition="gpu")
    slurm = select_backend("slurm", events.append, options=options)
    assert isinstance(slurm, SlurmBackend) and slurm.options == options
    assert isinstance(select_backend("local", events.append, options=options), LocalBackend)
    assert select_backend("docker", events.append).name == "docker"
    assert events == []  # a backend named is no choice to explain
    with pytest.raises(KeyError):
        registry.get("kubernetes")


def test_auto_with_nothing_to_build_runs_here_and_says_why() -> None:
    events: list[Event] = []
    assert select_backend("auto", events.append, need_lock=False).name == "local"
    assert [e.kind for e in events] == ["info"] and events[0].text.startswith("backend auto → local")


def test_where_code_runs_unsandboxed_and_which_backend_keeps_a_runs_nodes() -> None:
    assert registry.on_host() == ("local", "slurm") and registry.sandbox() == "docker"
    assert [e.name for e in registry.ENTRIES if e.spans_nodes] == ["slurm"]


def test_the_pytest_plugin_offers_the_registrys_backends(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "--repro-backend={auto,local,docker,podman,slurm}" in out
    assert "auto, local, docker, podman, slurm" in " ".join(out.split())


def test_every_command_offers_the_same_backends() -> None:
    import click

    from repro.cli import cli

    offered = {}
    for name in ("run", "check", "replay", "resume"):
        command = cli.load(name)
        option = next(p for p in command.params if p.name == "backend")
        assert isinstance(option.type, click.Choice)
        offered[name] = tuple(option.type.choices)
    assert set(offered.values()) == {registry.names()}
