"""The object every command receives: the project's store and settings, built once, lazily."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the core is imported by the command that uses it, not by the group
    from repro.config import Flags, Plan, Settings
    from repro.store.runs import Store


class AppContext:
    def __init__(self, start: str | None = None) -> None:
        self.start = Path(start).resolve() if start else Path.cwd()

    @cached_property
    def store(self) -> Store:
        from repro.store.runs import Store

        return Store.open(self.start)

    @cached_property
    def settings(self) -> Settings:
        """The project's settings with no flags: environment, project file, defaults."""
        return self.plan().settings

    def plan(self, flags: Flags | None = None) -> Plan:
        """The settings a command runs with: its flags over the environment, the project file, defaults.
        Paths in flags are relative to the directory the command was started in (or -C's).

        Raises:
            ConfigError: a bad value, naming where it came from.
        """
        from repro import config

        return config.resolve(self.store.root, flags, cwd=self.start)


pass_app = click.make_pass_decorator(AppContext)
