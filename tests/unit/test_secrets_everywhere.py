"""Secrets judged by shape and context: service tokens beyond the usual ones, string literals code
gives to credential names, tool credential files by path and content, values a log gives away, and
output files holding a token; with the look-alikes that are not secrets (digests, UUIDs, weights)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import pickle
import random
import sqlite3
import uuid
from pathlib import Path

import pytest

from repro.facts.secrets import REDACTED, Masker, Redactor, credential_in_file, mask_shapes
from repro.facts.secrets.files import code_secrets, credential_at
from repro.facts.secrets.outputs import OUTPUT_VERDICTS_DB, output_secrets, scan_file
from repro.facts.secrets.rules import shape_in_bytes

_rng = random.Random(2037)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HEX = "0123456789abcdef"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _jwt() -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part({'sub': _r(10), 'exp': 1900000000})}.{_r(43)}"


# Shapes beyond the common token formats, each as a tool prints or saves it.
SERVICE_TOKENS = {
    "vault": "hvs." + _r(90, _ALNUM + "_-"),
    "digitalocean": "dop_v1_" + _r(64, _HEX),
    "shopify": "shpat_" + _r(32, _HEX),
    "atlassian": "ATATT3xFfGF0" + _r(40, _ALNUM + "_-"),
    "linear": "lin_api_" + _r(40),
    "postman": f"PMAK-{_r(24, _HEX)}-{_r(34, _HEX)}",
    "grafana": "glsa_" + _r(32) + "_" + _r(8, _HEX),
    "tailscale": f"tskey-auth-{_r(12)}-{_r(30)}",
    "pulumi": "pul-" + _r(40, _HEX),
    "perplexity": "pplx-" + _r(48),
    "google oauth client": "GOCSPX-" + _r(28, _ALNUM + "_-"),
    "google access token": "ya29." + _r(120, _ALNUM + "_-"),
    "azure client secret": _r(3) + "8Q~" + _r(34, _ALNUM + "_~.-"),
    "github fine-grained": "github_pat_11" + _r(20) + "_" + _r(59),
    "slack user": f"xoxp-{_r(11, '0123456789')}-{_r(12, '0123456789')}-{_r(32, _HEX)}",
    "anthropic": "sk-ant-api03-" + _r(93, _ALNUM + "_-"),
    "openai project": "sk-proj-" + _r(64, _ALNUM + "_-"),
    "jwt": _jwt(),
}


@pytest.mark.parametrize("name", sorted(SERVICE_TOKENS))
def test_service_tokens_are_masked_by_shape(name: str) -> None:
    token = SERVICE_TOKENS[name]
    line = f"2026-01-01 12:00:00 INFO connecting with credential={token!r} to the service"
    masked, kinds = mask_shapes(line)
    assert token not in masked and REDACTED in masked and kinds, (name, masked)
    assert shape_in_bytes(json.dumps({"settings": {"value": token}}).encode()) is not None


def test_a_gcp_service_account_json_inside_a_config_is_found() -> None:
    body = base64.b64encode(_rng.randbytes(600)).decode()
    key = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    saved = json.dumps({"model": "bert", "gcs": {"type": "service_account", "private_key": key}}).encode()
    assert shape_in_bytes(saved) in ("a private key", "a cloud service-account file")


# Look-alikes: long random-looking text that is not a credential.
NOT_SECRETS = {
    "sha256": hashlib.sha256(b"weights").hexdigest(),
    "md5": hashlib.md5(b"x").hexdigest(),  # noqa: S324 - a digest to look at, not for security
    "git commit": hashlib.sha1(b"commit").hexdigest(),  # noqa: S324
    "uuid": str(uuid.UUID(int=_rng.getrandbits(128))),
    "image digest": "sha256:" + hashlib.sha256(b"image").hexdigest(),
    "base64 weights": base64.b64encode(_rng.randbytes(3000)).decode(),
    "wandb run id": "run-" + _r(8, "abcdefghijklmnopqrstuvwxyz0123456789"),
    "hf model id": "bert-base-uncased-finetuned-sst-2-english",
    "skip connection name": "sk-resnet-block-1",
}


@pytest.mark.parametrize("name", sorted(NOT_SECRETS))
def test_digests_uuids_and_weights_are_not_secrets(name: str) -> None:
    value = NOT_SECRETS[name]
    line = f"checkpoint {value} saved"
    assert mask_shapes(line) == (line, [])
    assert shape_in_bytes(line.encode()) is None
    assert code_secrets(f'checksum = "{value}"\nmodel_name = "{value}"\n', Redactor()) == set()


# --------------------------------------------------------------------------- code literals

WANDB = _r(40, _HEX)
DJANGO = "django-insecure-" + _r(30) + "$%^"


@pytest.mark.parametrize(
    ("code", "value"),
    [
        (f'import wandb\nwandb.login(key="{WANDB}")\n', WANDB),
        (f"SECRET_KEY = '{DJANGO}'\n", DJANGO),
        (f'cfg = {{"api_key": "{DJANGO}", "lr": 0.1}}\n', DJANGO),
        (f'os.environ["HF_TOKEN"] = "{DJANGO}"\n', DJANGO),
        (f'class C:\n    password: str = "{DJANGO}"\n', DJANGO),
        (f"self.client_secret = r'{DJANGO}'\n", DJANGO),
    ],
)
def test_literals_given_to_credential_names_in_code_are_secrets(code: str, value: str) -> None:
    assert code_secrets(code, Redactor()) == {value}


@pytest.mark.parametrize(
    "code",
    [
        'aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"]\n',
        'aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "")\n',
        'key = "AWS_SECRET_ACCESS_KEY"\nname = os.getenv("WANDB_API_KEY")\n',
        'if password == "changeme-please":\n    pass\n',
        'parser.add_argument("--api-key", default=None, help="the service key")\n',
        'tokenizer = AutoTokenizer.from_pretrained("gpt2", pad_token="<pad>")\n',
        'password = "${oc.env:DB_PASSWORD}"\nSECRET_KEY = ""\n',
    ],
)
def test_code_reading_a_credential_holds_none(code: str, tmp_path: Path) -> None:
    assert code_secrets(code, Redactor()) == set()
    script = tmp_path / "train.py"
    script.write_text(code)
    assert credential_in_file(script) is None  # the script stays in the snapshot


def test_an_aws_credentials_file_is_still_found_under_any_name(tmp_path: Path) -> None:
    creds = tmp_path / "aws_backup.txt"
    creds.write_text(f"[default]\naws_access_key_id = AKIA{_r(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')}\n"
                     f"aws_secret_access_key = {_r(40, _ALNUM + '/+')}\n")  # fmt: skip
    assert credential_in_file(creds) == "an AWS credentials file"


# --------------------------------------------------------------------------- tool credential files

LOCATED = {
    "wandb/settings": f"[default]\nentity = acme\napi_key = {_r(40, _HEX)}\n",
    ".kaggle/kaggle.json": json.dumps({"username": "acme", "key": _r(32, _HEX)}),
    ".huggingface/token": "hf_" + _r(34),
    ".aws/config": f"[profile ci]\nregion = eu-west-1\naws_secret_access_key = {_r(40)}\n",
    ".config/gcloud/application_default_credentials.json": json.dumps({"refresh_token": _r(40)}),
    ".azure/msal_token_cache.json": json.dumps({"AccessToken": {"x": {"secret": _r(60)}}}),
    ".docker/config.json": json.dumps({"auths": {"ghcr.io": {"auth": base64.b64encode(b"me:pw1").decode()}}}),
    ".config/gh/hosts.yml": f"github.com:\n    user: me\n    oauth_token: gho_{_r(36)}\n",
    ".kube/config": f"users:\n- name: ci\n  user:\n    token: {_r(40)}\n",
    ".databrickscfg": f"[DEFAULT]\nhost = https://x.cloud.databricks.com\ntoken = dapi{_r(32, _HEX)}\n",
}


@pytest.mark.parametrize("rel", sorted(LOCATED))
def test_tool_credential_files_are_known_by_path_and_content(rel: str, tmp_path: Path) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LOCATED[rel])
    assert credential_at(path, rel) is not None


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("wandb/settings", "[default]\nentity = acme\nproject = demo\n"),
        ("data/kaggle.json", json.dumps({"dataset": "titanic", "files": 3})),
        (".docker/config.json", json.dumps({"credsStore": "desktop"})),
        ("src/settings", "api_key = x\n"),  # not where W&B keeps its settings
        ("conf/config.json", json.dumps({"auth": "x" * 20})),
    ],
)
def test_the_same_names_without_a_login_are_code(rel: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    assert credential_at(path, rel) is None


# --------------------------------------------------------------------------- logs and outputs


def test_a_value_a_log_gives_away_is_masked_where_it_stands_alone() -> None:
    masker = Masker(set(), Redactor())
    secret = "pw-" + _r(16)
    learned = masker.learn(f"connecting to db, password: {secret}\nepoch 1 loss 0.3\n".encode())
    assert learned == {secret}
    assert secret not in masker.text(f"RuntimeError: login failed for {secret}")
    assert masker.known({"params": {"note": f"used {secret}"}, "hash": secret}) == {
        "params": {"note": "used ***"},
        "hash": secret,
    }
    assert masker.learn(b"epoch 1 loss 0.3\nepoch 2 loss 0.2\n") == set()


class _TrainingArguments:
    def __init__(self, hub_token: str) -> None:
        self.output_dir, self.hub_token, self.learning_rate = "out", hub_token, 5e-5


def test_outputs_holding_a_token_are_named_once_and_cached(tmp_path: Path) -> None:
    token = "hf_" + _r(34)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    files = {
        "outputs/config.json": json.dumps({"hidden": 8, "hub_token": token}).encode(),
        "outputs/training_args.bin": pickle.dumps(_TrainingArguments(token)),
        "outputs/model.bin": _rng.randbytes(1 << 20),
        "outputs/tokenizer.json": json.dumps({"pad_token": "<pad>", "eos_token": "</s>"}).encode(),
    }
    entries = []
    for rel, data in files.items():
        digest = hashlib.sha256(data).hexdigest()[:32]
        (blobs / digest).write_bytes(data)
        entries.append((rel, digest))
    db = tmp_path / OUTPUT_VERDICTS_DB
    found = output_secrets(entries, lambda d: blobs / d, db)
    assert [(f.path, f.kind) for f in found] == [
        ("outputs/config.json", "an API token"),
        ("outputs/training_args.bin", "an API token"),
    ]
    for digest in (d for _, d in entries):
        (blobs / digest).unlink()  # a second look reads the cache, not the files
    assert output_secrets(entries, lambda d: blobs / d, db) == found


def test_the_verdicts_of_many_outputs_are_read_back_across_lookup_batches(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    entries = []
    for i in range(1200):  # more digests than one lookup names
        data = f"sample {i}\n".encode() + (
            b'{"hub_token": "hf_' + _r(34).encode() + b'"}' if i == 777 else b""
        )
        digest = hashlib.sha256(data).hexdigest()[:32]
        (blobs / digest).write_bytes(data)
        entries.append((f"outputs/sample_{i:05d}.txt", digest))
    db = tmp_path / OUTPUT_VERDICTS_DB
    found = output_secrets(entries, lambda d: blobs / d, db)
    assert [f.path for f in found] == ["outputs/sample_00777.txt"]
    for _, digest in entries:
        (blobs / digest).unlink()  # every verdict now comes from the cache
    assert output_secrets(entries, lambda d: blobs / d, db) == found


def test_outputs_found_clean_together_are_looked_up_as_one_set(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    entries = []
    for i in range(40):
        data = f"sample {i}\n".encode() * 64
        digest = hashlib.sha256(data).hexdigest()[:32]
        (blobs / digest).write_bytes(data)
        entries.append((f"outputs/sample_{i:05d}.txt", digest))
    db = tmp_path / OUTPUT_VERDICTS_DB
    assert output_secrets(entries, lambda d: blobs / d, db) == []
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM outputs")  # no verdict of any one file is left: the set's row answers

    def unread(digest: str) -> Path:
        raise AssertionError(f"read {digest} again")

    assert output_secrets(reversed(entries), unread, db) == []
    token = json.dumps({"hub_token": "hf_" + _r(34)}).encode()
    digest = hashlib.sha256(token).hexdigest()[:32]
    (blobs / digest).write_bytes(token)
    more = [*entries, ("outputs/config.json", digest)]  # another set: its files are read
    found = output_secrets(more, lambda d: blobs / d, db)
    assert [(f.path, f.kind) for f in found] == [("outputs/config.json", "an API token")]
    assert output_secrets(more, lambda d: blobs / d, db) == found  # a set holding one is never kept clean


def test_a_token_cut_by_a_chunk_boundary_is_found(tmp_path: Path) -> None:
    token = "ghp_" + _r(36)
    path = tmp_path / "big.bin"
    path.write_bytes(b"\0" * ((1 << 20) - 10) + token.encode() + b"\0" * 100)
    assert scan_file(path) == "an API token"
