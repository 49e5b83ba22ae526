"""Every command has help text and appears in the README; errors are one line, not tracebacks."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.shell_completion import ShellComplete

from repro.cli import cli
from repro.cli.lazy import TABLE

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
COMMANDS = sorted(TABLE)


def test_the_expected_commands_exist() -> None:
    expected = {
        "run",
        "ls",
        "show",
        "export",
        "verify",
        "replay",
        "diff",
        "check",
        "build",
        "base-image",
        "gc",
    }
    assert expected <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_and_is_in_the_readme(name: str, cli_run) -> None:  # type: ignore[no-untyped-def]
    result = cli_run(name, "--help")
    assert result.code == 0
    assert "Usage: repro " + name in result.out
    assert len(cli.load(name).help or "") > 20
    assert f"repro {name}" in README


@pytest.mark.parametrize("name", COMMANDS)
def test_the_command_table_says_what_each_command_says(name: str) -> None:
    """`repro --help` and completion read the table, not the command: its summary must be the command's."""
    command = cli.load(name)
    assert TABLE[name].summary == command.get_short_help_str(10_000)
    for limit in (45, 70, 80):
        assert cli.summary(name, limit) == command.get_short_help_str(limit)


def test_every_command_of_a_module_is_in_the_table() -> None:
    """A click command defined in a cli/*_cmd.py module is reachable only through the table."""
    import importlib

    listed = {(entry.module, entry.attr) for entry in TABLE.values()}
    for path in sorted((Path(__file__).resolve().parents[2] / "repro" / "cli").glob("*_cmd.py")):
        module = importlib.import_module(f"repro.cli.{path.stem}")
        defined = {(path.stem, k) for k, v in vars(module).items() if isinstance(v, click.Command)}
        assert defined <= listed, path.name


def test_a_mistyped_command_is_answered_with_the_close_ones(cli_run) -> None:  # type: ignore[no-untyped-def]
    result = cli_run("lss")
    assert result.code == 2
    assert "No such command 'lss'. Did you mean 'ls'?" in result.err


def test_command_names_complete_from_the_table_with_their_summaries() -> None:
    shell = ShellComplete(cli, {}, "repro", "_REPRO_COMPLETE")
    items = shell.get_completions([], "ve")
    assert [(i.value, i.help) for i in items] == [
        (n, cli.summary(n, 45)) for n in ("verify", "verify-attestation")
    ]
    assert "--project" in [i.value for i in shell.get_completions([], "--")]


@pytest.fixture
def cli_run(cli):  # type: ignore[no-untyped-def]
    return cli


def test_unknown_command_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("frobnicate")
    assert result.code == 2 and "No such command" in result.err


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--version")
    assert result.code == 0 and "repro" in result.out
