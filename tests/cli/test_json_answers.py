"""Every `--json` answer is one object whose `format` names a schema shipped in the package, and
the answer of a real invocation validates against it (jsonschema, draft 2020-12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from repro import schemas
from repro.store.record import WARNING_CODES
from tests.conftest import Cli, Project

SCHEMA_DIR = Path(schemas.__file__).parent

TRAIN = """\
import argparse, os, random
import repro

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
os.makedirs("outputs", exist_ok=True)
for step in range(3):
    repro.log_metric("loss", random.random() * args.lr, step=step)
with open("outputs/model.txt", "w") as f:
    f.write(str(random.random()))
print("done")
"""

# Fails the first time (no marker yet), succeeds when resumed: what `repro resume` continues.
FLAKY = """\
import os, sys
os.makedirs("outputs", exist_ok=True)
marker = "outputs/first-attempt"
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit("killed before the end")
print("finished")
"""

HYDRA_APP = """\
import hydra
from omegaconf import DictConfig


@hydra.main(config_path=None, config_name=None, version_base=None)
def main(cfg: DictConfig) -> None:
    print("lr", cfg.lr)


if __name__ == "__main__":
    main()
"""


def _registry() -> Registry:
    resources = [
        (schema["$id"], Resource.from_contents(schema))
        for schema in (json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.json")))
    ]
    return Registry().with_resources(resources)


REGISTRY = _registry()


def valid(kind: str, out: str) -> dict[str, Any]:
    """The one JSON document on stdout, checked against the schema of ``kind``."""
    answer: dict[str, Any] = json.loads(out)
    assert answer["format"] == f"repro.{kind}/v1"
    validator = Draft202012Validator(schemas.load(kind), registry=REGISTRY)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(answer)]
    assert errors == [], errors
    for warning in answer.get("warnings") or []:
        assert warning["code"] in WARNING_CODES, warning
    return answer


def test_a_schema_per_kind_each_a_valid_schema_naming_its_format() -> None:
    assert {p.stem for p in SCHEMA_DIR.glob("*.json")} == set(schemas.KINDS)
    for kind in schemas.KINDS:
        schema = schemas.load(kind)
        Draft202012Validator.check_schema(schema)
        assert schema["properties"]["format"] == {"const": schemas.format_name(kind)}
        assert schema["$id"].endswith(f"/{kind}.json")


def test_the_schemas_are_package_data_and_the_readme_lists_kinds_and_warning_codes() -> None:
    repo = Path(__file__).resolve().parents[2]
    assert '"schemas/*.json"' in (repo / "pyproject.toml").read_text()
    readme = (repo / "README.md").read_text()
    for kind in schemas.KINDS:
        assert f"| `repro.{kind}/v1` | `{kind}.json` |" in readme, kind
    for code in WARNING_CODES:
        assert f"| `{code}` |" in readme, code


def test_a_schema_refuses_what_it_does_not_describe() -> None:
    """The schemas are strict where repro controls the answer: a renamed key fails."""
    validator = Draft202012Validator(schemas.load("export"), registry=REGISTRY)
    good = {"format": "repro.export/v1", "id": "20260101-000000-abcd", "as": "capsule", "path": "x.tar",
            "bytes": 10, "image_bytes": None, "signed": False, "key_id": None}  # fmt: skip
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "capsule": "x.tar"})
    assert not validator.is_valid({**good, "format": "repro.export/v2"})


@pytest.fixture
def ran(project: Project, cli: Cli) -> Project:
    """A project with one real run (local backend) and its replay."""
    project.write("repro.yaml", "backend: local\n")
    project.write("train.py", TRAIN)
    project.commit("train")
    r = cli("run", "--json", "--seed", "3", "train.py", "--lr", "0.05", cwd=project.root)
    assert r.code == 0, r.err
    answer = valid("run", r.out)
    assert Path(answer["run_dir"]).is_dir() and answer["command"] == "python train.py --lr 0.05"
    assert [w["code"] for w in answer["warnings"]] == ["not_locked"]
    return project


def test_run_replay_show_ls_diff_answers(ran: Project, cli: Cli) -> None:
    r = cli("replay", "--json", cwd=ran.root)
    assert r.code == 0, r.err
    replay = valid("replay", r.out)
    assert replay["status"] == "identical" and replay["replay_id"] != replay["original"]
    record = valid("capsule", cli("show", "latest", "--json", cwd=ran.root).out)
    assert record["kind"] == "replay"
    runs = valid("ls", cli("ls", "--json", cwd=ran.root).out)["runs"]
    assert [r["kind"] for r in runs] == ["replay", "run"]
    diff = valid("diff", cli("diff", "latest~1", "latest", "--json", cwd=ran.root).out)
    assert diff["results_differ"] is False


def test_check_answers(ran: Project, cli: Cli, tmp_path: Path) -> None:
    r = cli("check", "--json", "--seed", "5", "--", "python", "train.py", cwd=ran.root)
    assert r.code == 0, r.err
    check = valid("check", r.out)
    assert check["kind"] == "repeat" and len(check["run_ids"]) == 2
    golden = tmp_path / "golden.tar"
    assert cli("export", "latest~2", "-o", str(golden), cwd=ran.root).code == 0
    r = cli("check", "--against", str(golden), "--json", cwd=ran.root)
    assert r.code == 0, r.err
    against = valid("check", r.out)
    assert against["kind"] == "against" and against["diff"]["format"] == "repro.diff/v1"


def test_export_and_verify_answers(ran: Project, cli: Cli, tmp_path: Path) -> None:
    tar = tmp_path / "run.tar"
    exported = valid("export", cli("export", "latest", "-o", str(tar), "--json", cwd=ran.root).out)
    assert exported["path"] == str(tar) and exported["bytes"] == tar.stat().st_size
    job = valid("export", cli("export", "latest", "--as", "slurm", "-o", str(tmp_path / "j.sbatch"), "--json",
                              cwd=ran.root).out)  # fmt: skip
    assert job["as"] == "slurm" and job["image_bytes"] is None
    ok = valid("verify", cli("verify", str(tar), "--json", cwd=ran.root).out)
    assert ok["ok"] is True and ok["capsule_format"] == "repro.capsule/v1" and ok["error"] is None
    raw = bytearray(tar.read_bytes())
    raw[raw.index(b"parse_args()")] ^= 1  # a byte of the stored train.py
    tar.write_bytes(bytes(raw))
    r = cli("verify", str(tar), "--json", cwd=ran.root)
    assert r.code == 6 and "checksum" in r.err
    failed = valid("verify", r.out)
    assert failed["ok"] is False and failed["error"]["code"] == "capsule_invalid"


def test_resume_answer(project: Project, cli: Cli) -> None:
    project.write("repro.yaml", "backend: local\n")
    project.write("flaky.py", FLAKY)
    project.commit("flaky")
    assert cli("run", "flaky.py", cwd=project.root).code == 4
    r = cli("resume", "--json", cwd=project.root)
    assert r.code == 0, r.err
    resumed = valid("resume", r.out)
    assert resumed["status"] == "succeeded" and resumed["resumed_from"]


def test_lock_answers(project: Project, cli: Cli) -> None:
    project.write("repro.yaml", "backend: local\n")
    project.write("requirements.in", "torch==2.13.0\n")
    r = cli("lock", "--check", "--json", cwd=project.root)
    assert r.code == 1 and "stale" in r.err  # no lockfile yet: stale, exit 1 (not 2, a usage error)
    stale = valid("lock", r.out)
    assert stale["action"] == "check" and stale["stale"] is True
    project.lock_torch()
    r = cli("lock", "--check", "--json", cwd=project.root)
    assert r.code == 0 and valid("lock", r.out)["stale"] is False
    r = cli("lock", "--json", cwd=project.root)
    assert r.code == 0, r.err
    kept = valid("lock", r.out)
    assert kept["action"] == "compile" and kept["compiled"] is False
    assert any(p.startswith("torch==2.13.0") for p in kept["packages"])


def test_a_hydra_multirun_is_one_answer(project: Project, cli: Cli) -> None:
    pytest.importorskip("hydra")
    project.write("repro.yaml", "backend: local\n")
    project.write("app.py", HYDRA_APP)
    project.write(".gitignore", "outputs/\nmultirun/\n")
    project.commit("app")
    r = cli("run", "--json", "app.py", "-m", "+lr=0.1,0.01", cwd=project.root)
    assert r.code == 0, r.err
    answer = valid("multirun", r.out)
    assert [run["status"] for run in answer["runs"]] == ["succeeded", "succeeded"]
    assert all(run["format"] == "repro.run/v1" for run in answer["runs"])


@pytest.mark.docker
def test_build_answer(project: Project, cli: Cli) -> None:
    project.lock_torch()
    r = cli("build", "--json", cwd=project.root)
    assert r.code == 0, r.err
    built = valid("build", r.out)
    assert built["template"] == "cpu" and built["id"].startswith("sha256:") and built["tag"]
