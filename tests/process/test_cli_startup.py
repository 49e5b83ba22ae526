"""The command line's fixed cost: importing it, asking for help or completing a command name loads
no command module and nothing heavy; running a command loads that command's module only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "numpy", "docker", "requests", "yaml", "repro.run.capture", "repro.start", "repro.config")


def _loaded_after(code: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Run ``code`` in a fresh interpreter; which heavy modules and command modules it imported."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], "
        "'commands': sorted(m for m in sys.modules if m.startswith('repro.cli.') and m.endswith('_cmd'))}))"
    )
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, env=environ, capture_output=True, text=True, check=True
    )
    answer: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_importing_the_cli_loads_no_command_and_nothing_heavy(tmp_path: Path) -> None:
    assert _loaded_after("import repro.cli", tmp_path) == {"heavy": [], "commands": []}


def test_help_and_completion_of_command_names_load_no_command(tmp_path: Path) -> None:
    code = "from repro.cli import main\nmain(['--help'])"
    assert _loaded_after(code, tmp_path) == {"heavy": [], "commands": []}
    completing = {"_REPRO_COMPLETE": "bash_complete", "COMP_WORDS": "repro ve", "COMP_CWORD": "1"}
    code = "from repro.cli import cli\ntry:\n    cli.main(prog_name='repro')\nexcept SystemExit:\n    pass"
    assert _loaded_after(code, tmp_path, completing) == {"heavy": [], "commands": []}


def test_a_command_loads_its_own_module_only(tmp_path: Path) -> None:
    loaded = _loaded_after("from repro.cli import main\nmain(['ls'])", tmp_path)
    assert loaded["commands"] == ["repro.cli.records_cmd"]
    assert not {"torch", "docker", "requests", "repro.run.capture", "repro.start"} & set(loaded["heavy"])


# What a plain `repro export` of a run never needs: signing, attesting, carried data, masking,
# credential files, the record renderers, the resume machinery that seals a killed run, the
# checkpoint API, the backends (their registry, events, sandboxed unpickler), the tensor comparison,
# and the standard library's heavier modules none of those need (html, tempfile, random).
EXPORT_SPARES = (
    "repro.resume",
    "repro.checkpoint",
    "repro.runtime.resumestate",
    "repro.backends.registry",
    "repro.backends.base",
    "repro.backends.unpickle",
    "repro.compare.tensors",
    "html",
    "tempfile",
    "random",
    "repro.store.signing",
    "repro.store.attestation",
    "repro.store.oms",
    "repro.store.datablobs",
    "repro.facts.secrets.mask",
    "repro.facts.secrets.files",
    "repro.facts.secrets.redact",
    "repro.ui.records",
    "torch",
    "numpy",
    "docker",
)


def test_a_plain_export_loads_no_signing_masking_or_rendering_code(tmp_path: Path) -> None:
    from repro.store.record import FileEntry, Record
    from repro.store.runs import Store

    store = Store(tmp_path)
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.results.outputs = [
        FileEntry(f"outputs/sample_{i}.txt", 9, store.put_bytes(f"sample {i}\n".encode()), stored=True)
        for i in range(40)
    ]
    store.seal(record, store.begin_run(record.id, record.command.argv))
    code = (
        "import json, sys\nfrom repro.cli import main\n"
        "assert main(['export', 'latest', '-o', 'run.tar']) == 0\n"
        f"print(json.dumps([m for m in {EXPORT_SPARES!r} if m in sys.modules]))"
    )
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=environ, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "run.tar").stat().st_size > 40 * 1024


# What `repro run --help` and a local run of a small script in a git work tree (empty requirements,
# lock already compiled) never need: the docker SDK, the comparison machinery, the image builder
# and the package-index reader (a cached lock), the project-lock readers, packaging's requirement
# parser (no requirement to parse) and urllib.request (no file: URL to read).
RUN_SPARES = (
    "docker",
    "requests",
    "torch",
    "numpy",
    "repro.compare.verdict",
    "repro.compare.ops",
    "repro.compare.outputs",
    "repro.check",
    "repro.backends.images",
    "repro.fetch.index",
    "repro.facts.projectlock.pylock",
    "packaging.requirements",
    "urllib.request",
)


def _spared_by(argv: list[str], cwd: Path) -> list[str]:
    code = (
        "import json, sys\nfrom repro.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(json.dumps([code, [m for m in {RUN_SPARES!r} if m in sys.modules]]))"
    )
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=environ, capture_output=True, text=True, check=True
    )
    code_and_loaded: list[object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert code_and_loaded[0] == 0, done.stderr
    loaded = code_and_loaded[1]
    assert isinstance(loaded, list)
    return loaded


def test_run_help_and_a_local_run_load_no_docker_sdk_comparison_or_image_builder(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "train.py").write_text("print('loss 0.5')\n")
    (tmp_path / "requirements.in").write_text("")
    git("add", "-A")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "start")
    assert _spared_by(["run", "--help"], tmp_path) == []
    local = ["run", "--backend", "local", "--", sys.executable, "train.py"]
    assert _spared_by(local, tmp_path) == []  # the first run also compiles the (empty) lock
    assert _spared_by(local, tmp_path) == []
