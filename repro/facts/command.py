"""The command: argv normalisation, hyper-parameters parsed from it, config files it names.

Hyper-parameters come in two shapes: `--opt value` / `--opt=value` (argparse, click) and
Hydra/OmegaConf overrides (`a.b=c`, `+a=b`, `++a=b`, `~a`). Both are typed the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import UsageError

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".conf")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
# A Hydra override: an optional +, ++ or ~, a dotted key (config groups may hold `/` and `@`), `=value`.
_OVERRIDE = re.compile(r"^(?P<op>~|\+\+|\+)?(?P<key>[A-Za-z_][\w.@/-]*)(?:=(?P<value>.*))?$", re.S)


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
    """`true`/`yes` → True, numbers → int or float, anything else stays a string."""
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
    for key, value, hydra, _ in option_groups(args):
        if key is None:
            continue
        if hydra or key not in params:
            params[key] = value
        else:
            old = params[key]
            params[key] = [*old, value] if isinstance(old, list) else [old, value]
    return params


def option_groups(args: list[str]) -> list[tuple[str | None, Any, bool, list[str]]]:
    """The arguments as `parse_params` reads them, one group per option: (its key, its value, whether
    it is a Hydra override, its tokens); a positional argument is a group of key None. Everything from
    `--` on is one last group of key None."""
    groups: list[tuple[str | None, Any, bool, list[str]]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            groups.append((None, None, False, args[i:]))
            break
        if arg.startswith("-") and len(arg) > 1 and not _NUMBER.match(arg):
            if "=" in arg:
                name, _, value = arg.partition("=")
                groups.append((_key(name), parse_value(value), False, [arg]))
            elif i + 1 < len(args) and _is_value(args[i + 1]):
                groups.append((_key(arg), parse_value(args[i + 1]), False, args[i : i + 2]))
                i += 1
            else:
                groups.append((_key(arg), True, False, [arg]))
        else:
            override = hydra_override(arg)
            key = override[0] if override is not None else None
            groups.append((key, override[1] if override else None, override is not None, [arg]))
        i += 1
    return groups


def swap_param(argv: list[str], other: list[str], key: str) -> list[str] | None:
    """``argv`` with hyper-parameter ``key`` as ``other`` gives it (its tokens there in place of its
    tokens here, dropped where ``other`` lacks it); None when neither command line sets it as an option.
    """
    head = len(argv) - len(script_args(argv))
    mine, theirs = option_groups(argv[head:]), option_groups(other[len(other) - len(script_args(other)) :])
    if not any(g[0] == key for g in mine + theirs):
        return None
    taken = [t for g in theirs if g[0] == key for t in g[3]]
    out: list[str] = list(argv[:head])
    for k, _, _, tokens in mine:
        if k == key:
            out += taken
            taken = []
        elif k is None and tokens[:1] == ["--"]:
            out += taken + tokens
            taken = []
        else:
            out += tokens
    return out + taken


def _is_value(arg: str) -> bool:
    """Whether an argument after an option is its value (not another option, not a Hydra override)."""
    if arg.startswith("-"):
        return bool(_NUMBER.match(arg))
    return hydra_override(arg) is None


def hydra_override(arg: str) -> tuple[str, Any] | None:
    """A Hydra/OmegaConf override as (key, typed value), or None when `arg` is not one.

    `a.b=c` and `+a=b`, `++a=b` set a value; `~a` (or `~a=b`) deletes the key and is
    recorded as None. Hydra's own values are typed: `null`, `[1,2]` lists, quoted strings,
    and a comma list (`lr=0.1,0.01`, a multirun sweep) becomes a list.
    """
    match = _OVERRIDE.match(arg)
    if match is None:
        return None
    op, key, value = match.group("op"), match.group("key"), match.group("value")
    if op == "~":
        return key, None
    if value is None:
        return None
    return key, _hydra_value(value)


def _hydra_value(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.lower() in ("null", "none"):
        return None
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_hydra_value(part.strip()) for part in _split_commas(inner)] if inner else []
    parts = _split_commas(text)
    if len(parts) > 1:
        return [_hydra_value(part.strip()) for part in parts]
    return parse_value(text)


def _split_commas(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config (Hydra's composed `.hydra/config.yaml`) as dotted keys: `{"optim.lr": 0.1}`."""
    if not isinstance(config, dict):
        return {prefix: config} if prefix else {}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(flatten_config(value, name))
        else:
            flat[name] = value
    return flat


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


# --------------------------------------------------------------------------- torchrun

_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Options that only say how a single node's ranks meet or log: repro's own launcher decides those.
_TORCHRUN_SINGLE_NODE = {
    "standalone": False, "rdzv_backend": True, "rdzv_endpoint": True, "rdzv_id": True, "rdzv_conf": True,
    "master_addr": True, "master_port": True, "node_rank": True, "local_addr": True, "log_dir": True,
    "redirects": True, "r": True, "tee": True, "t": True, "monitor_interval": True, "max_restarts": True,
    "start_method": True, "role": True, "run_path": False, "local_ranks_filter": True,
}  # fmt: skip


@dataclass(frozen=True)
class TorchrunLaunch:
    """`torchrun [options] script.py args…` read as repro's own multi-process run."""

    argv: list[str]  # `python script.py args…` (or `python -m module args…`)
    nproc_per_node: int
    ignored: list[str]  # torchrun options repro's launcher sets itself


def _torchrun_rest(argv: list[str]) -> list[str] | None:
    """The arguments after `torchrun` / `python -m torch.distributed.run`, or None for other commands."""
    if argv and Path(argv[0]).name == "torchrun":
        return argv[1:]
    if len(argv) >= 3 and Path(argv[0]).name.startswith("python") and argv[1] == "-m":
        if argv[2] in _TORCHRUN_MODULES:
            return argv[3:]
    return None


def parse_torchrun(argv: list[str]) -> TorchrunLaunch | None:
    """Read a torchrun command line; None when `argv` is not one.

    Raises:
        UsageError: more than one node, a non-numeric process count, an unknown option, no script.
    """
    rest = _torchrun_rest(argv)
    if rest is None:
        return None
    nproc, module, no_python, ignored = 1, False, False, []
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        name, has_value, value = rest[i].lstrip("-").partition("=")
        key = name.replace("-", "_")
        takes_value = key in ("nproc_per_node", "nnodes") or _TORCHRUN_SINGLE_NODE.get(key, False)
        written = rest[i]
        if takes_value and not has_value:
            if i + 1 >= len(rest):
                raise UsageError(f"torchrun option {rest[i]} needs a value")
            value, i = rest[i + 1], i + 1
            written = f"{written} {value}"
        if key == "nproc_per_node":
            nproc = _process_count(value)
        elif key == "nnodes":
            if value not in ("1", "1:1"):
                raise UsageError(
                    f"torchrun --nnodes {value}: repro runs one node here",
                    hint="use `repro run --backend slurm --nodes N` for several nodes",
                )
        elif key in ("m", "module"):
            module = True
        elif key == "no_python":
            no_python = True
        elif key in _TORCHRUN_SINGLE_NODE:
            ignored.append(written)
        else:
            raise UsageError(
                f"torchrun option {written} is not understood by repro",
                hint="repro run --nproc-per-node N -- python script.py  (repro launches torchrun itself)",
            )
        i += 1
    if i >= len(rest):
        raise UsageError(
            "torchrun was given no script to run", hint="repro run -- torchrun --nproc-per-node 2 train.py"
        )
    target = rest[i:]
    if no_python:
        command = target
    elif module:
        command = ["python", "-m", *target]
    else:
        command = ["python", *target]
    return TorchrunLaunch(command, nproc, ignored)


def _process_count(value: str) -> int:
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise UsageError(
        f"torchrun --nproc-per-node {value}: repro needs a number of processes",
        hint="give it as a number, e.g. --nproc-per-node 2 (it is recorded and replayed as is)",
    )
