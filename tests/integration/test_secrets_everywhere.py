"""A secret found anywhere is absent everywhere: values judged secret in one place (a code file's
literal, a key block appended to a tracked file, a tool's credential file) are masked in every other
place the run keeps them (the patch, the logs, the stderr tail); code that only *reads* a credential
from the environment stays in the snapshot; outputs holding a token make `repro export` refuse.

One real run (local backend) is shared by every assertion of this module.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store
from tests.builders import show_json
from tests.conftest import Project, git
from tests.integration.secret_plant import leaks

_rng = random.Random(37)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


WANDB_CODE_KEY = _r(40, "0123456789abcdef")  # committed: wandb.login(key="…")
WANDB_SETTINGS_KEY = _r(40, "0123456789abcdef")  # wandb/settings: api_key = …
DJANGO_KEY = "django-insecure-" + _r(24) + "!#%" + _r(12)  # uncommitted SECRET_KEY = '…'
PGP_BODY = [base64.b64encode(_rng.randbytes(48)).decode() for _ in range(10)]
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(PGP_BODY) + "\n=" + _r(4)
    + "\n-----END PGP PRIVATE KEY BLOCK-----\n"
)  # fmt: skip
KAGGLE_KEY = _r(32, "0123456789abcdef")
DOCKER_AUTH = base64.b64encode(f"trainer:{_r(20)}".encode()).decode()
HF_FILE_TOKEN = "hf_" + _r(34)
HUB_TOKEN = "hf_" + _r(34)  # written by the run into outputs/config.json
HUB_TOKEN_2 = "hf_" + _r(34)  # pickled into outputs/training_args.bin

AUTH_PY = f'''"""Login to the tracker."""


class _Wandb:
    def login(self, key: str) -> None:
        raise RuntimeError(f"wandb login refused: key {{key}} is not valid for entity acme")


wandb = _Wandb()


def login() -> None:
    wandb.login(key="{WANDB_CODE_KEY}")
'''

PLANTED = [
    WANDB_CODE_KEY, WANDB_SETTINGS_KEY, DJANGO_KEY, PGP_BODY[4], KAGGLE_KEY, DOCKER_AUTH, HF_FILE_TOKEN
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Any]:
    project = Project.init(tmp_path_factory.mktemp("everywhere") / "proj")
    project.write(".gitignore", "outputs/\n")
    project.script("hub_train.py", "train.py")
    project.write("auth.py", AUTH_PY)
    project.write("settings.py", 'APP_NAME = "demo"\nSECRET_KEY = None\n')
    project.write("keys/notes.txt", "Rotation notes: keys are kept in the vault, not here.\n")
    project.commit("train")
    # Uncommitted work: a Django secret key, a key block appended to a tracked file.
    project.write("settings.py", f"APP_NAME = \"demo\"\nSECRET_KEY = '{DJANGO_KEY}'\n")
    with open(project.root / "keys/notes.txt", "a") as f:
        f.write("\nbackup of the signing key:\n" + PGP)
    # Credential files of ML tools, under the names the tools give them (no config suffix).
    settings = f"[default]\nentity = acme\nproject = demo\napi_key = {WANDB_SETTINGS_KEY}\n"
    project.write("wandb/settings", settings)
    project.write(".kaggle/kaggle.json", json.dumps({"username": "acme", "key": KAGGLE_KEY}))
    logins = {"auths": {"registry.acme.example": {"auth": DOCKER_AUTH}}}
    project.write(".docker/config.json", json.dumps(logins))
    project.write(".huggingface/token", HF_FILE_TOKEN + "\n")
    env = {"HUB_TOKEN_FOR_TEST": HUB_TOKEN, "HUB_TOKEN_2_FOR_TEST": HUB_TOKEN_2}
    result = project.repro("run", "--backend", "local", "--", "python", "train.py", "--epochs", "2", env=env)
    return project, result


def test_the_run_is_recorded_and_its_traceback_is_masked(run: tuple[Project, Any]) -> None:
    project, result = run
    assert result.code == ExitCode.COMMAND_FAILED, result.err
    record = show_json(project)
    tail = "\n".join(record["results"]["stderr_tail"])
    assert "wandb login refused" in tail and WANDB_CODE_KEY not in tail
    stderr = Store(project.root).read_blob(record["results"]["logs"]["stderr"]) or b""
    assert b"wandb login refused" in stderr and WANDB_CODE_KEY.encode() not in stderr
    assert b"wandb.login(key=" in stderr  # the traceback's source line, its value masked


def test_no_value_judged_secret_is_kept_anywhere_in_the_store(run: tuple[Project, Any]) -> None:
    project, _ = run
    assert leaks(project.root / ".repro", PLANTED) == {}


def test_code_reading_a_credential_from_the_environment_stays_in_the_snapshot(
    run: tuple[Project, Any],
) -> None:
    project, _ = run
    record = show_json(project)
    files = {f["path"]: f for f in record["code"]["files"]}
    for rel in ("train.py", "auth.py", "settings.py"):
        assert rel in files and files[rel]["stored"], rel
    assert "train.py" not in record["code"]["excluded"]
    stored = Store(project.root).read_blob(files["train.py"]["hash"]) or b""
    assert b'aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "")' in stored
    settings = (Store(project.root).read_blob(files["settings.py"]["hash"]) or b"").decode()
    assert "SECRET_KEY = '***'" in settings and 'APP_NAME = "demo"' in settings


def test_credential_files_of_ml_tools_are_left_out_by_path_and_content(run: tuple[Project, Any]) -> None:
    project, _ = run
    excluded = set(show_json(project)["code"]["excluded"])
    assert {"wandb/settings", ".kaggle/kaggle.json", ".docker/config.json", ".huggingface/token"} <= excluded
    assert "keys/notes.txt" in excluded


def test_the_patch_carries_no_key_block(run: tuple[Project, Any]) -> None:
    project, _ = run
    record = show_json(project)
    patch = (Store(project.root).read_blob(record["code"]["patch"]) or b"").decode()
    assert "settings.py" in patch and "SECRET_KEY = '***'" in patch
    assert "PRIVATE KEY" not in patch and PGP_BODY[4] not in patch
    assert any(w["code"] == "secret_changes_excluded" and "keys/notes.txt" in w["message"]
               for w in record["warnings"])  # fmt: skip


def test_export_refuses_outputs_holding_a_token_naming_file_and_shape(
    run: tuple[Project, Any], tmp_path: Path
) -> None:
    project, _ = run
    tar = tmp_path / "run.tar"
    refused = project.repro("export", "latest", "-o", str(tar))
    assert refused.code == ExitCode.USAGE, refused.err
    lines = [line for line in refused.err.splitlines() if line.strip()]
    assert lines[0].startswith("repro: error:") and "outputs/config.json" in lines[0]
    assert "token" in lines[0] and HUB_TOKEN not in refused.err
    assert "--allow-secrets-in-outputs" in refused.err
    assert "Traceback" not in refused.err and not tar.exists()
    allowed = project.repro("export", "latest", "-o", str(tar), "--allow-secrets-in-outputs")
    assert allowed.code == 0, allowed.err
    assert leaks(tmp_path, PLANTED) == {}
    assert leaks(tmp_path, [HUB_TOKEN, HUB_TOKEN_2]) != {}  # outputs are the result: kept as written


def test_the_pickled_training_arguments_are_named_too(run: tuple[Project, Any]) -> None:
    project, _ = run
    refused = project.repro("export", "latest", "-o", str(project.root.parent / "x.tar"))
    assert "outputs/training_args.bin" in refused.err


def test_git_still_sees_the_project_as_written(run: tuple[Project, Any]) -> None:
    project, _ = run
    assert "keys/notes.txt" in git(project.root, "status", "--porcelain")
