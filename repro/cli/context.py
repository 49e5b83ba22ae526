"""The object every command receives: the project's store and settings, built once, lazily."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import click

from repro import config
from repro.config import Settings
from repro.store import Store


class AppContext:
    def __init__(self, start: str | None = None) -> None:
        self.start = Path(start).resolve() if start else Path.cwd()

    @cached_property
    def store(self) -> Store:
        return Store.open(self.start)

    @cached_property
    def settings(self) -> Settings:
        return config.load(self.store.root)


pass_app = click.make_pass_decorator(AppContext)
