"""Redaction of what the record keeps verbatim: the command line and the environment variables.

An option's or variable's value is hidden whole (``***``) when its name is a credential
(`rules.classify_name`), or when the name is ambiguous and the value looks like one; every other
value keeps everything but its credential-shaped parts (`postgres://admin:***@db`). Hydra
overrides are judged by their key at any depth (`db.password=x`, `+api.token=x`, `++a.b.secret=x`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from repro.facts.secrets.rules import (
    MIN_SECRET,
    REDACTED,
    NameVerdict,
    classify_name,
    hides_value,
    mask_shapes,
    name_words,
    secret_parts,
)

# `key=value` Hydra/OmegaConf overrides: `a.b=c`, `+a=b`, `++a.b=c` (groups may hold `/` and `@`).
_OVERRIDE = re.compile(r"^(?P<key>(?:\+\+|\+)?[A-Za-z_][\w.@/-]*)=(?P<value>.*)$", re.S)
_OPTION = re.compile(r"^--?[A-Za-z]")  # `--lr`, `-p`; not `-1` or `-`
_KEY = re.compile(r"(?:--?|\+\+|\+)?[A-Za-z_][\w.@/-]*")  # an option's or an override's name
# The working-directory variables the shell sets: `PWD` names a directory, not a password.
_SHELL_DIRS = frozenset({"PWD", "OLDPWD"})


@dataclass(frozen=True)
class _Arg:
    """One argument as the redaction sees it: the option it is the value of, or its own `name=value`."""

    text: str
    name: str | None  # the option or override key this argument gives a value to
    value: str | None  # the value part (the whole argument, or what follows `=`)
    prefix: str  # what is kept before the value (`--token=`, `db.password=`, or nothing)


@dataclass(frozen=True)
class Redactor:
    """The name rules (`rules.classify_name`) with a project's own patterns (`secrets.patterns`)."""

    extra: tuple[str, ...] = ()

    def classify(self, name: str) -> NameVerdict:
        return classify_name(name, self.extra)

    def is_secret_name(self, name: str) -> bool:
        return self.classify(name) == "secret"

    def hides(self, name: str, value: object) -> bool:
        """Whether ``value`` given under ``name`` is hidden whole."""
        return hides_value(self.classify(name), value)

    def env(self, variables: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """Variables as the record keeps them: values under credential names hidden (`HF_TOKEN`),
        switch values kept (`HF_HUB_DISABLE_IMPLICIT_TOKEN=1`), credential shapes masked in the rest."""
        out: dict[str, str] = {}
        hits: list[str] = []
        for name, value in variables.items():
            if hides_value(self._env_verdict(name), value):
                out[name] = REDACTED
                hits.append(f"env:{name}")
                continue
            clean, kinds = mask_shapes(value)
            if kinds:
                hits.append(f"env:{name} ({', '.join(kinds)} in the value)")
            out[name] = clean
        return out, hits

    def argv(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """The command line as recorded: credential values hidden, credential shapes masked.

        Returns the redacted argv and where something was hidden (`argv:--api-key`).
        """
        out: list[str] = []
        hits: list[str] = []
        for arg in self._arguments(argv):
            if arg.name is not None and arg.value is not None and self.hides(arg.name, arg.value):
                out.append(arg.prefix + REDACTED)
                hits.append(f"argv:{arg.name}")
                continue
            clean, kinds = mask_shapes(arg.text)
            if kinds:
                hits.append(f"argv:{arg.name or 'an argument'} ({', '.join(kinds)})")
            out.append(clean)
        return out, hits

    def secret_values(self, environ: dict[str, str], argv: list[str]) -> set[str]:
        """Every secret value in an environment and a command line, to be masked wherever it shows:
        values under credential names (ambiguous ones when they look random), credential shapes."""
        values: set[str] = set()
        for name, value in environ.items():
            if hides_value(self._env_verdict(name), value):
                values.add(value)
            values |= secret_parts(value)
        for arg in self._arguments(argv):
            if arg.name is not None and arg.value is not None and self.hides(arg.name, arg.value):
                values.add(arg.value)
            values |= secret_parts(arg.text)
        return {v for v in values if len(v) >= MIN_SECRET}

    def _env_verdict(self, name: str) -> NameVerdict:
        """An environment variable's class: `*_TOKEN`, `*_KEY`, `*_AUTH*` are credentials there
        (`NPM_TOKEN`, `STRIPE_KEY`), even where an option of that name would be ambiguous; a bare
        `KEY` or `P` stays ambiguous (judged by its value)."""
        if name in _SHELL_DIRS:
            return "plain"
        verdict = self.classify(name)
        return "secret" if verdict == "ambiguous" and len(name_words(name)) > 1 else verdict

    def _arguments(self, argv: list[str]) -> Iterator[_Arg]:
        """Each argument with the name it gives a value to: the option before it (`--api-key X`),
        its own (`--token=X`, `db.password=X`), or none (a positional argument, an option)."""
        pending: str | None = None  # the option before this argument (whose value it may be)
        for arg in argv:
            option, pending = pending, None
            is_value = option is not None and not _OPTION.match(arg) and arg != "--"
            if is_value and option is not None and self.classify(option) != "plain":
                yield _Arg(arg, option, arg, "")
            elif _OPTION.match(arg) and "=" in arg:
                name, _, value = arg.partition("=")
                yield _Arg(arg, name, value, name + "=")
            elif _OPTION.match(arg):
                pending = arg
                yield _Arg(arg, None, None, "")
            elif (m := _OVERRIDE.match(arg)) is not None and not (
                is_value and self.classify(m["key"]) == "plain"
            ):
                yield _Arg(arg, m.group("key"), m.group("value"), m.group("key") + "=")
            else:
                yield _Arg(arg, option if is_value else None, None, "")


def redacted_options(argv: list[str]) -> list[str]:
    """What a recorded command line hides, by name: `--api-key`, `db.password`, `argument 3`."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        if REDACTED not in arg:
            continue
        before = argv[i - 1] if i > 0 else ""
        head = arg[: arg.index(REDACTED)]
        if head.endswith("=") and _KEY.fullmatch(head[:-1]):
            name = head[:-1]  # `--token=***`, `db.password=***`
        elif _OPTION.match(before) and "=" not in before:
            name = before  # `--api-key ***`, `--db postgres://admin:***@host`
        else:
            name = f"argument {i}"
        if name not in found:
            found.append(name)
    return found
