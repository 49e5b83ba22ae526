"""The credential locations of ML tools are listed once: what keeps a host path from a replay
(`repro.facts.hostpaths`) and what marks a file as a login whatever its suffix
(`repro.facts.secrets.rules`) both come from it. Every name either matched stays matched."""

from __future__ import annotations

import pytest

from repro.facts import hostpaths
from repro.facts.secrets import rules

# Every part (or two parts in a row) that makes a host path private, as named.
PRIVATE_PARTS = [
    ".ssh", ".gnupg", ".netrc", "_netrc", ".aws", ".azure", ".docker", ".kaggle", ".huggingface",
    ".git-credentials", ".pypirc", ".npmrc", ".pgpass", ".kube", ".terraform.d", ".vault-token",
    ".databrickscfg", ".boto", ".s3cfg", ".wandb", ".mlflow", ".comet.config", ".neptune",
    ".config/gcloud", ".config/gh", ".config/wandb", ".cache/huggingface", "wandb/settings",
    ".env", ".env.local", ".env.production", "secret.env", "prod.env", ".git", ".repro",
]  # fmt: skip


@pytest.mark.parametrize("part", PRIVATE_PARTS)
def test_every_private_location_is_private_wherever_it_stands(part: str) -> None:
    assert hostpaths.private_part(part) == part
    assert hostpaths.private_part(f"data/{part}/file.bin") == part
    assert hostpaths.private_part(f"home/user/{part}") == part


# A file at each credential location, with what it holds when it is a login.
LOGINS = [
    ("wandb/settings", b"[default]\napi_key = abcdef0123456789\n", "a W&B settings file with an API key"),
    (".config/wandb/settings", b"api_key = x" + b"0" * 39 + b"\n", "a W&B settings file with an API key"),
    (".cache/huggingface/token", b"hf_abc\n", "a Hugging Face token file"),
    (".huggingface/token", b"hf_abc\n", "a Hugging Face token file"),
    (".cache/huggingface/stored_tokens", b"[t]\nhf_token = x\n", "a Hugging Face token file"),
    (".kaggle/kaggle.json", b'{"username": "u", "key": "0123456789abcdef"}', "a Kaggle API key file"),
    ("kaggle.json", b'{"username": "u", "key": "0123456789abcdef"}', "a Kaggle API key file"),
    (".aws/config", b"[default]\naws_secret_access_key = x\n", "an AWS config with keys"),
    (".config/gcloud/application_default_credentials.json", b"{}", "a Google Cloud credential file"),
    (".config/gcloud/credentials.db", b"SQLite", "a Google Cloud credential file"),
    (".config/gcloud/access_tokens.db", b"SQLite", "a Google Cloud credential file"),
    (".config/gcloud/legacy_credentials/me@x.org/adc.json", b"{}", "a Google Cloud credential file"),
    (".azure/accessTokens.json", b"[]", "an Azure credential cache"),
    (".azure/msal_token_cache.json", b"{}", "an Azure credential cache"),
    (".azure/service_principal_entries.json", b"[]", "an Azure credential cache"),
    (".docker/config.json", b'{"auths": {"r": {"auth": "dXNlcjpwdw=="}}}', "a Docker registry login"),
    (".config/gh/hosts.yml", b"github.com:\n  oauth_token: gho_x\n", "a GitHub CLI login"),
    (".kube/config", b"users:\n- user:\n    token: abc\n", "a Kubernetes login"),
    (".databrickscfg", b"[DEFAULT]\ntoken = dapi123\n", "a Databricks login"),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "head", "kind"), LOGINS)
def test_every_credential_file_is_recognised_by_path_and_content(rel: str, head: bytes, kind: str) -> None:
    for where in (rel, f"home/user/{rel}"):
        assert rules.credential_location(where), where
        assert rules.location_holds(where, head) == kind, where
    assert rules.location_holds(rel, b"  \n") is None  # an empty file holds nothing


def test_a_settings_file_without_a_key_is_only_settings() -> None:
    assert rules.location_holds("wandb/settings", b"[default]\nproject = x\n") is None
    assert rules.location_holds(".kaggle/kaggle.json", b'{"username": "u"}') is None
    assert not rules.credential_location("data/train.csv")
