"""The command: argv normalisation, hyper-parameters parsed from it, config files it names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".conf")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def normalise_argv(argv: list[str]) -> list[str]:
    """`train.py …` means `python train.py …`."""
    if argv and argv[0].endswith(".py"):
        return ["python", *argv]
    return list(argv)


def script_args(argv: list[str]) -> list[str]:
    """The arguments after the interpreter and script (or module)."""
    if not argv:
        return []
    if Path(argv[0]).name.startswith("python"):
        rest = argv[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[1:]  # interpreter flags such as -u
        if rest[:1] == ["-m"]:
            return rest[2:]
        return rest[1:]
    return argv[1:]


def script_path(argv: list[str]) -> str | None:
    """The script a `python [flags] script.py …` command runs (None for -m, -c or other commands)."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    rest = argv[1:]
    while rest and rest[0].startswith("-"):
        if rest[0] in ("-m", "-c"):
            return None
        rest = rest[1:]
    return rest[0] if rest else None


def parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if _NUMBER.match(text):
        try:
            return int(text)
        except ValueError:
            return float(text)
    return text


def _key(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def parse_params(args: list[str]) -> dict[str, Any]:
    """Hyper-parameters from argv: `--lr 0.1`, `--batch-size=64`, `--flag`, `-e 3`.

    A value that is itself an option (`--a --b`) makes the first a boolean flag;
    repeated options become lists; negative numbers are values, not options.
    """
    params: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if key in params:
            old = params[key]
            params[key] = [*old, value] if isinstance(old, list) else [old, value]
        else:
            params[key] = value

    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if arg.startswith("-") and len(arg) > 1 and not _NUMBER.match(arg):
            if "=" in arg:
                name, _, value = arg.partition("=")
                put(_key(name), parse_value(value))
            elif i + 1 < len(args) and (not args[i + 1].startswith("-") or _NUMBER.match(args[i + 1])):
                put(_key(arg), parse_value(args[i + 1]))
                i += 1
            else:
                put(_key(arg), True)
        i += 1
    return params


def config_files(args: list[str], cwd: Path, project_root: Path) -> list[Path]:
    """Existing config-like files named in argv (as values or `--x=path`), inside the project."""
    found: list[Path] = []
    for arg in args:
        candidate = arg.partition("=")[2] if arg.startswith("-") and "=" in arg else arg
        if not candidate.lower().endswith(CONFIG_SUFFIXES):
            continue
        path = (cwd / candidate).resolve()
        if path.is_file() and path.is_relative_to(project_root) and path not in found:
            found.append(path)
    return found
