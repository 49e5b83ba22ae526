"""A backend's flags of `repro run`: declared as plain data in its package, named by its registry
entry, turned into click options by `repro.cli.options.backend_flags` and received as one
`BackendFlags`; those that set a setting win over repro.yaml, and given with another backend they are
a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from repro import config
from repro.backends import registry
from repro.backends.slurm.flags import FLAGS
from repro.cli.options import BackendFlags, SectionedCommand, backend_flags
from repro.errors import ConfigError, ExitCode, UsageError


def _command(seen: dict[str, BackendFlags]) -> click.Command:
    @click.command(cls=SectionedCommand)
    @backend_flags
    def command(backend_flags: BackendFlags) -> None:
        seen["flags"] = backend_flags

    return command


def test_the_flags_come_from_each_entry_and_reach_the_command_as_given() -> None:
    assert registry.get("slurm").flags is FLAGS
    seen: dict[str, BackendFlags] = {}
    argv = ["--nodes", "2", "--no-requeue", "--sbatch-arg=--qos=high", "--sbatch-arg=--mem=1G", "--detach"]
    r = CliRunner().invoke(_command(seen), argv)
    assert r.exit_code == 0, r.output
    assert seen["flags"].given == {
        "slurm": {"nodes": 2, "requeue": False, "sbatch_arg": ("--qos=high", "--mem=1G"), "detach": True}
    }
    assert seen["flags"].detach

    assert CliRunner().invoke(_command(seen), []).exit_code == 0
    assert seen["flags"].given == {"slurm": {}} and not seen["flags"].detach

    r = CliRunner().invoke(_command(seen), ["--nodes", "0"])
    assert r.exit_code == 2 and "--nodes" in r.output  # a count is 1 or more


def test_help_lists_a_backends_flags_under_its_heading() -> None:
    text = CliRunner().invoke(_command({}), ["--help"], terminal_width=100).output
    options, slurm = text.split(f"{FLAGS.title}:\n")
    assert "--help" in options and "--nodes" not in options
    assert [line.split()[0] for line in slurm.splitlines() if line.startswith("  --")] == [
        flag.names[0] for flag in FLAGS.flags
    ]


def _plan(root: Path, backend: str, yaml: str = "") -> config.Plan:
    (root / "repro.yaml").write_text(yaml)
    return config.resolve(root, config.Flags(backend=backend), environ={})


def _flags(**given: Any) -> BackendFlags:
    return BackendFlags({"slurm": given})


def test_flags_that_set_a_setting_win_over_repro_yaml_and_are_named_as_its_source(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "slurm", "slurm:\n  nodes: 3\n  partition: cpu\n  requeue: true\n")
    plan = _flags(nodes=2, requeue=False, sbatch_arg=("--qos=high",), detach=True).over(plan)
    settings = plan.settings
    assert (settings.slurm_nodes, settings.slurm_partition, settings.slurm_requeue) == (2, "cpu", False)
    assert settings.slurm_sbatch_args == ("--qos=high",)
    assert plan.source("slurm_nodes") == "--nodes" and plan.source("slurm_requeue") == "--requeue"
    assert (
        plan.source("slurm_sbatch_args") == "--sbatch-arg" and plan.source("slurm_partition") == "repro.yaml"
    )

    with pytest.raises(ConfigError) as caught:  # checked by the section's own rule, naming the flag
        _flags(partition="gpu;rm").over(_plan(tmp_path, "slurm"))
    assert "(from --partition)" in caught.value.message and caught.value.exit_code == ExitCode.USAGE


def test_flags_given_with_another_backend_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        _flags(nodes=2, partition="gpu").over(_plan(tmp_path, "local"))
    assert caught.value.message == "--nodes, --partition only apply to --backend slurm"
    assert caught.value.hint == "add --backend slurm (or `backend: slurm` in repro.yaml)"
    with pytest.raises(UsageError, match="^--detach only applies to --backend slurm$"):
        _flags(detach=True).over(_plan(tmp_path, "auto"))
    plan = _plan(tmp_path, "local")
    assert BackendFlags({"slurm": {}}).over(plan) is plan  # none given: nothing to check


def test_flags_for_this_run_only_reach_the_options_through_the_entry() -> None:
    options = object()
    assert _flags(detach=True).options("slurm", options) is options  # Slurm's --detach is not an option
    assert _flags(nodes=2).options("local", options) is options
    assert FLAGS.run_only({"nodes": 2, "detach": True}) == {"detach": True}
