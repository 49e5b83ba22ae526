"""Guards: import boundaries hold, and `repro --help` stays light."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "repro"

# Each third-party library has one home.
HOMES = {
    "docker": ("backends/docker/",),
    "git": ("facts/code.py",),
    "click": ("cli/",),
    "piptools": (),  # only ever run as a subprocess, from facts/pipcompile.py
    "hydra": ("facts/hydra.py",),
    "mlflow": ("integrations/mlflow/",),
    "dvc": ("integrations/dvc.py",),
    "wandb": (),  # configured through its environment variables only
    "lightning": ("integrations/lightning.py",),
    "transformers": ("integrations/hf.py",),
    "IPython": ("ui/notebook.py",),
    "pypi_simple": ("fetch/index.py",),
    "cryptography": ("store/signing.py",),
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule (the rules only read it)."""
    return ast.parse(path.read_text())


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    tree = _tree(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return frozenset(found)


@functools.cache
def _all_modules() -> tuple[Path, ...]:
    return tuple(sorted(PACKAGE.rglob("*.py")))


def _modules() -> list[Path]:
    return list(_all_modules())


@pytest.mark.parametrize("library", sorted(HOMES))
def test_third_party_libraries_have_one_home(library: str) -> None:
    homes = HOMES[library]
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in _modules()
        if library in _imports(p) and not str(p.relative_to(PACKAGE)).startswith(homes or ("\0",))
    ]
    assert offenders == []


@pytest.mark.parametrize("module", ["capsule.py", "record.py", "recordio.py", "tarwriter.py", "verify.py"])
def test_the_capsule_format_imports_no_git_docker_or_torch(module: str) -> None:
    assert not _imports(PACKAGE / "store" / module) & {"git", "docker", "torch", "numpy", "click"}


def test_the_runtime_is_stdlib_only() -> None:
    allowed = {"repro", "__future__"} | set(sys.stdlib_module_names)
    for path in [*(PACKAGE / "runtime").rglob("*.py"), PACKAGE / "__init__.py"]:
        assert _imports(path) <= allowed, path


def test_core_modules_never_import_the_cli() -> None:
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(("cli/", "pytest_plugin", "__main__")):
            continue
        text = path.read_text()
        assert "repro.cli" not in text, rel


def test_no_print_outside_ui() -> None:
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(("ui/", "runtime/")):
            continue
        calls = [
            n
            for n in ast.walk(_tree(path))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
        ]
        assert not calls, rel


def test_help_does_not_import_torch_numpy_docker_or_the_index_client() -> None:
    code = (
        "import sys; from repro.cli import main; main(['--help']); "
        "print(sorted(m for m in ('torch', 'numpy', 'docker', 'git', 'mlflow', 'hydra', 'IPython', "
        "'requests', 'pypi_simple') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_command_modules_import_no_other_command_module() -> None:
    """Shared options live in cli/options.py and shared helpers in cli/events.py, never in a command."""
    for path in sorted((PACKAGE / "cli").glob("*_cmd.py")):
        tree = _tree(path)
        sideways = [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("_cmd")
        ]
        assert sideways == [], path.name


def test_commands_are_registered_through_the_one_table() -> None:
    """cli/lazy.py's table is the one place that names the command modules (each imported when its
    command runs): the group imports none of them, and no other cli module imports by name."""
    tree = _tree(PACKAGE / "cli" / "__init__.py")
    eager = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("_cmd")
    ]
    eager += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "repro.cli"
        for alias in node.names
        if alias.name.endswith("_cmd")
    ]
    assert eager == []
    by_name = sorted(p.name for p in (PACKAGE / "cli").glob("*.py") if "importlib" in _imports(p))
    assert by_name == ["lazy.py"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _repro_imports(path: Path, known: set[str]) -> set[str]:
    """The repro modules a module imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full not in known and node.module == "repro":
                    continue  # `from repro import __version__`: a constant set before the package imports
                found.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known}


def test_no_module_imports_itself_through_others() -> None:
    modules = {_module_name(p): p for p in _modules()}
    graph = {name: _repro_imports(path, set(modules)) - {name} for name, path in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            name = todo.pop()
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                todo.extend(graph[name])
        return False

    cycles = sorted(f"{a} ↔ {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert cycles == []


def test_replay_is_imported_only_by_its_command() -> None:
    """`repro.replay` is the verb; check, resume and the rest use its parts in `repro.rerun`."""
    modules = {_module_name(p): p for p in _modules()}
    importers = sorted(
        str(path.relative_to(PACKAGE))
        for path in modules.values()
        if "repro.replay" in _repro_imports(path, set(modules))
    )
    assert importers == ["cli/replay_cmd.py"]


def test_only_the_slurm_backend_runs_slurm_commands() -> None:
    slurm = {"sbatch", "srun", "squeue", "scontrol", "scancel", "sacct", "sinfo"}
    offenders = []
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Constant):
                if node.elts[0].value in slurm and not rel.startswith("backends/slurm/"):
                    offenders.append(rel)
    assert offenders == []


def _package_node(module: str) -> str:
    """The node of a repro module in the package graph: its subpackage, or the top-level module itself."""
    return module.split(".")[1] if module.count(".") else module


def _package_edges() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in _modules()}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == "repro":
            continue
        for target in _repro_imports(path, set(modules)) - {"repro"}:
            a, b = _package_node(name), _package_node(target)
            if a != b:
                edges.setdefault(a, set()).add(b)
    return edges


def _package_cycles(edges: dict[str, set[str]]) -> list[str]:
    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    return sorted(f"{a} → {b}" for a in edges for b in edges[a] if reaches(b, a))


def test_no_import_cycle_between_packages_outside_backends() -> None:
    edges = {a: bs - {"backends"} for a, bs in _package_edges().items() if a != "backends"}
    assert _package_cycles(edges) == []


def test_no_import_cycle_between_packages() -> None:
    assert _package_cycles(_package_edges()) == []


def test_the_runtime_imports_nothing_outside_itself() -> None:
    modules = {_module_name(p): p for p in _modules()}
    for path in (PACKAGE / "runtime").rglob("*.py"):
        outside = {m for m in _repro_imports(path, set(modules)) if not m.startswith("repro.runtime")}
        assert outside == set(), path.relative_to(PACKAGE)


def _code_strings(tree: ast.AST) -> list[str]:
    """The string constants of a module, docstrings left out."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def _contract_names() -> list[str]:
    """Every name the runtime contract defines for the host and the runtime to agree on: its
    environment variables, files and directories, and each stream's file and log name."""
    from repro.runtime import contract

    names = [
        v for k, v in vars(contract).items() if k.isupper() and not k.startswith("_") and isinstance(v, str)
    ]
    for key, stream in contract.STREAMS.items():  # a log name that is its key is spelled to look it up
        names += [stream.file] if stream.log == key else [stream.file, stream.log]
    return sorted(set(names))


# Words a contract name shares with text that is not about the runtime's files: a mode, a row key, a
# record field ("rng"), a key of exact resume's process state ("ring"), /proc, pip's --find-links, the word
# "ranks" (help, batch scripts). Each of these streams is checked by its file name.
_COMMON_WORDS = {
    "strict",
    "gpu",
    "off",
    "none",
    "kind",
    "e",
    "event",
    "inductor.",
    "rng",
    "ring",
    "proc",
    "links",
    "ranks",
}


def test_each_contract_name_is_spelled_in_at_most_two_modules() -> None:
    """The names of the runtime contract (environment variables, files, directories, every stream of
    `contract.STREAMS`) live in repro/runtime/contract.py; code elsewhere uses them by name (the
    injected sitecustomize may spell the two it needs before the package loads)."""
    names = [n for n in _contract_names() if n not in _COMMON_WORDS]
    assert len(names) >= 30
    strings = {str(p.relative_to(PACKAGE)): _code_strings(_tree(p)) for p in _modules()}
    spelled = {}
    for name in names:
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
        spelled[name] = sorted(rel for rel, found in strings.items() if any(pattern.search(s) for s in found))
    assert {name: where for name, where in spelled.items() if len(where) > 2} == {}
    assert all("runtime/contract.py" in where for where in spelled.values())


def test_one_rank_reader() -> None:
    """Only repro/runtime/jsonl.py reads the torchrun rank (``RANK``, ``LOCAL_RANK``) from the environment."""
    readers = [
        str(p.relative_to(PACKAGE))
        for p in (PACKAGE / "runtime").rglob("*.py")
        if {"RANK", "LOCAL_RANK"} & set(_code_strings(_tree(p)))
    ]
    assert readers == ["runtime/jsonl.py"]


def _package(module: str) -> str:
    """The package of a repro module (``repro.store.runs`` → ``store``); a top-level module is its own."""
    return module.split(".")[1] if module.count(".") >= 1 else module


def test_backends_sit_on_no_import_cycle_between_packages() -> None:
    """Layers, bottom up: store; facts, collect, fetch, runtime; backends (exporters included); config;
    the verbs. backends/ imports nothing above it, and nothing below it imports backends/."""
    modules = {_module_name(p): p for p in _modules()}
    above = {"config", "run", "replay", "check", "resume", "window", "export", "inprocess", "sandbox"}
    above |= {"cli", "ui", "compare", "diff", "integrations", "pytest_plugin", "checkpoint", "interrupt"}
    below = {"store", "facts", "collect", "fetch", "runtime"}
    upward, downward = [], []
    for name, path in modules.items():
        targets = {_package(m) for m in _repro_imports(path, set(modules))}
        if _package(name) == "backends" and targets & above:
            upward.append(f"{name} → {sorted(targets & above)}")
        if _package(name) in below and "backends" in targets:
            downward.append(name)
    assert upward == [] and downward == []


def _runtime_imports(path: Path) -> set[str]:
    """The modules a module imports when it runs: those imported for type checking alone left out."""
    tree = _tree(path)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_collect_phase_imports_no_backend() -> None:
    """Collecting a run reads its spec, its result and the runtime's files: repro/run/collect*.py import
    nothing from repro.backends when they run (the spec's and result's types only for type checking)."""
    phase = sorted((PACKAGE / "run").glob("collect*.py"))
    assert len(phase) >= 2
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(
            m for m in _runtime_imports(p) if m.split(".")[:2] == ["repro", "backends"]
        )
        for p in phase
    }
    assert {rel: found for rel, found in offenders.items() if found} == {}


def _calls(path: Path, name: str) -> list[int]:
    """Lines where ``path`` calls a function or reads an attribute called ``name``."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == name:
                found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load):
            found.append(node.lineno)
    return found


def test_every_run_starts_through_the_one_entry_point() -> None:
    """Choosing the backend (with the rule "must an image be built"), the status line and the
    restore of a recorded run's lockfile are spelled in repro/start.py alone."""
    rel = {p: str(p.relative_to(PACKAGE)) for p in _modules()}
    choosers = [rel[p] for p in rel if _calls(p, "select_backend") and rel[p] != "start.py"]
    assert choosers == []
    lines = [rel[p] for p in rel if "· backend " in p.read_text() and rel[p] != "start.py"]
    assert lines == []
    verbs = ("run/", "check.py", "replay.py", "resume.py", "pytest_plugin.py", "cli/")
    restorers = [rel[p] for p in rel if rel[p].startswith(verbs) and _calls(p, "lock_blob")]
    assert restorers == []


def test_the_top_level_holds_at_most_twenty_modules() -> None:
    """The verbs sit in repro/ itself; everything else lives in the package of its concern."""
    assert len(list(PACKAGE.glob("*.py"))) <= 20


MAX_MODULE_LINES = 600  # a few screens: past that a module holds more than one job


def test_no_module_is_longer_than_a_few_screens() -> None:
    """A module over ``MAX_MODULE_LINES`` lines is split by the jobs it holds (README, Architecture)."""
    long = [
        f"{path.relative_to(PACKAGE)} ({n} lines)"
        for path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []


def test_no_function_is_longer_than_eighty_lines() -> None:
    long = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert long == []


# A string equal to a backend's name outside backends/ that is not that backend, with the reason it stays.
NOT_A_BACKEND = {
    ("export.py", "slurm"): "an export format (`repro export --as slurm`: a batch script)",
    ("store/record.py", "local"): "the record format's default: a record that names no backend ran locally",
    ("store/index.py", "slurm"): "a detached run's `repro ls` row; the store sits below backends/",
    (
        "runtime/node.py",
        "docker",
    ): "the docker command a node runs; the runtime imports nothing outside itself",
    ("runtime/node.py", "podman"): "the podman command a node runs (rootless, its own storage per node)",
    ("run/lock.py", "local"): "a lock variant: the lock of this interpreter's environment",
    ("facts/lockvariants.py", "local"): "a lock variant: the lock of this interpreter's environment",
}


def test_no_module_outside_backends_names_a_backend() -> None:
    """Modules ask `repro.backends.registry` about a backend (`in_place`, `locks_first`, its options,
    its lines in `show`) instead of comparing its name, so adding a backend touches its module, its
    entry and the README."""
    from repro.backends import registry

    names = {entry.name for entry in registry.ENTRIES}
    found = set()
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith("backends/"):
            continue
        found |= {(rel, s) for s in _code_strings(_tree(path)) if s in names}
    assert sorted(found - set(NOT_A_BACKEND)) == []
    assert sorted(set(NOT_A_BACKEND) - found) == []  # each exception still needed


def test_a_backend_s_own_settings_are_its_options_not_the_run_spec() -> None:
    """`RunSpec` holds what every backend needs: the image's inputs (`ImageInputs`) and Slurm's
    allocation (`SlurmOptions`) are those backends' own options, never fields of the spec; a backend
    that builds an image is one the registry settles the lock for (`locks_first`), so it is handed them."""
    import dataclasses

    from repro.backends import registry
    from repro.backends.base import RunSpec
    from repro.backends.images import BuildsImage, ImageInputs
    from repro.backends.slurm.options import SlurmOptions

    spec = {f.name for f in dataclasses.fields(RunSpec)}
    own = {f.name for options in (ImageInputs, SlurmOptions) for f in dataclasses.fields(options)}
    assert sorted(spec & own) == []
    builders = [entry for entry in registry.ENTRIES if isinstance(entry.make(), BuildsImage)]
    assert builders and [entry.name for entry in builders if not entry.locks_first] == []


def test_a_backends_flags_are_declared_in_its_package_only() -> None:
    """`repro run`'s flags of a backend (`--nodes`, `--detach`) come from its registry entry: cli/
    turns them into click options generically and spells none of them."""
    from repro.backends import registry

    flags = {
        name
        for entry in registry.ENTRIES
        for flag in (entry.flags.flags if entry.flags else ())
        for name in flag.names
    }
    assert "--nodes" in flags  # the rule guards something
    found = set()
    for path in (PACKAGE / "cli").rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        found |= {(rel, s) for s in _code_strings(_tree(path)) if s in flags}
    assert sorted(found) == []
