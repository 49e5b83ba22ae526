"""Every command has help text and appears in the README; errors are one line, not tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.cli import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
COMMANDS = sorted(cli.commands)


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
    assert len(cli.commands[name].help or "") > 20
    assert f"repro {name}" in README


@pytest.fixture
def cli_run(cli):  # type: ignore[no-untyped-def]
    return cli


def test_unknown_command_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("frobnicate")
    assert result.code == 2 and "No such command" in result.err


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--version")
    assert result.code == 0 and "repro" in result.out
