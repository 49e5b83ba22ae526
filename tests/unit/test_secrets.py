from __future__ import annotations

from repro.facts.secrets import REDACTED, Redactor, is_secret_file, strip_url_credentials


def test_env_names_are_redacted_and_urls_stripped() -> None:
    env, hits = Redactor().env(
        {
            "WANDB_API_KEY": "k1",
            "AWS_REGION": "eu",
            "MY_TOKEN": "t",
            "DB_PASSWORD": "p",
            "OMP_NUM_THREADS": "1",
            "PROXY": "http://bob:hunter2@proxy:3128",
        }  # fmt: skip
    )
    assert env["WANDB_API_KEY"] == env["AWS_REGION"] == env["MY_TOKEN"] == env["DB_PASSWORD"] == REDACTED
    assert env["OMP_NUM_THREADS"] == "1"
    assert env["PROXY"] == "http://proxy:3128"
    assert len(hits) == 5


def test_argv_values_of_credential_options_are_redacted() -> None:
    argv, hits = Redactor().argv(
        ["python", "t.py", "--api-key", "s3cr3t", "--token=abc", "--lr", "0.1", "https://u:pw@host/x"]
    )
    assert argv == [
        "python",
        "t.py",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--lr",
        "0.1",
        "https://host/x",
    ]
    assert hits


def test_extra_patterns_extend_the_defaults() -> None:
    r = Redactor(("*ACME*",))
    assert r.is_secret_name("ACME_THING") and r.is_secret_name("GITHUB_TOKEN")
    assert not r.is_secret_name("LEARNING_RATE")


def test_secret_files() -> None:
    for name in (".env", ".env.local", "id_rsa", "keys/server.pem", "gcp/service-account-prod.json"):
        assert is_secret_file(name), name
    for name in ("train.py", "environment.yml", "data/keys.csv"):
        assert not is_secret_file(name), name


def test_strip_url_credentials_keeps_plain_urls() -> None:
    assert strip_url_credentials("git@github.com:org/repo.git") == "git@github.com:org/repo.git"
    assert strip_url_credentials("https://tok@github.com/o/r.git") == "https://github.com/o/r.git"
