"""The secret rules: names (secret, ambiguous, plain), shapes, key files under any name, config layouts."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from repro.facts.secrets import (
    REDACTED,
    Masker,
    Redactor,
    config_secrets,
    credential_in_file,
    is_secret_file,
    mask_shapes,
    redacted_options,
    run_masker,
)
from repro.facts.secrets.rules import classify_name, looks_random, strip_url_credentials

_rng = random.Random(5)


def _token(n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _key_block(kind: str = "RSA ", end: str | None = None) -> str:
    body = "\n".join(base64.b64encode(_rng.randbytes(48)).decode() for _ in range(6))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {end or kind}PRIVATE KEY-----\n"


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name",
    ["--password", "--api-key", "--token", "--secret", "--passphrase", "--pw", "--hf-tok", "--hub_token",
     "db.password", "+api.token", "++a.b.secret", "pw", "pwd", "passwd", "credentials", "AccountKey",
     "WANDB_API_KEY", "HF_TOKEN", "HF_PAT", "WANDB_PASS", "AWS_SECRET_ACCESS_KEY", "AZURE_STORAGE_KEY",
     "clientSecret", "APIKey", "ssh_key", "SLACK_BOT_TOKEN", "MLFLOW_TRACKING_PASSWORD"],
)  # fmt: skip
def test_unambiguous_names_are_secret(name: str) -> None:
    assert classify_name(name) == "secret"


@pytest.mark.parametrize(
    "name", ["-p", "-k", "--key", "--pat", "--pkey", "--auth", "--csv-img-key", "--sort-key", "--pad-token"]
)
def test_ambiguous_names_are_judged_by_their_value(name: str) -> None:
    assert classify_name(name) == "ambiguous"


@pytest.mark.parametrize(
    "name",
    ["--pos-weight", "--key-dim", "--tokenizer", "--max-new-tokens", "--eos-token-id", "--use_auth_token",
     "--token-file", "--password-env", "--patience", "--resume", "--wandb-project", "TOKENIZERS_PARALLELISM",
     "AWS_REGION", "--special-tokens", "-n", "--lr", "model.tokenizer"],
)  # fmt: skip
def test_plain_names_are_never_redacted_by_name(name: str) -> None:
    assert classify_name(name) == "plain"


def test_extra_patterns_extend_the_defaults() -> None:
    r = Redactor(("*ACME*",))
    assert (
        r.is_secret_name("ACME_THING")
        and r.is_secret_name("--acme-thing")
        and r.is_secret_name("GITHUB_TOKEN")
    )
    assert not r.is_secret_name("LEARNING_RATE")


def test_random_looking_values() -> None:
    assert looks_random("5d41402abc4b2a76b9719d911017c592") and looks_random(_token(32))
    for ordinary in (
        "bert-base-uncased-sst2",
        "checkpoints/epoch_10.pt",
        "run-20240101-1200",
        "3",
        "filepath",
    ):
        assert not looks_random(ordinary), ordinary


# --------------------------------------------------------------------------- argv


ORDINARY_COMMANDS = [
    ["python", "train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False",
     "--eval_iters=20", "--log_interval=1", "--block_size=64", "--batch_size=12", "--max_iters=2000"],
    ["python", "sample.py", "--out_dir=out-shakespeare-char", "--max_new_tokens=100",
     "--start=FILE:prompt.txt"],
    ["python", "-m", "open_clip_train.main", "--train-data", "/data/cc12m/cc12m-train-{0000..2175}.tar",
     "--csv-img-key", "filepath", "--csv-caption-key", "title", "--csv-separator", ",",
     "--report-to", "wandb",
     "--wandb-project-name", "open-clip", "--model", "RN50", "--precision", "amp"],
    ["python", "run_clm.py", "--model_name_or_path", "gpt2", "--tokenizer_name", "gpt2", "--use_auth_token",
     "--config_overrides=n_embd=1024,n_head=16", "--output_dir", "/tmp/test-clm"],
    ["python", "main.py", "-p", "3", "-k", "5", "--pos-weight", "2.0", "--key-dim", "64", "--pkey", "id",
     "--resume", "checkpoints/last.pt", "model.lr=0.1", "+trainer.max_epochs=3", "++data.token_budget=4096",
     "~model.dropout", "hydra.run.dir=outputs/x", "--pad-token", "<pad>", "--sort-key", "length"],
    ["python", "train.py", "--dsn", "postgresql://localhost:5432/runs", "--repo", "ssh://git@github.com/o/r.git",
     "--note", "https://github.com/org/repo@v1.2", "--password-file", "/run/secrets/db"],
]  # fmt: skip


@pytest.mark.parametrize("argv", ORDINARY_COMMANDS, ids=[c[1] for c in ORDINARY_COMMANDS])
def test_ordinary_training_commands_are_kept_as_typed(argv: list[str]) -> None:
    out, hits = Redactor().argv(argv)
    assert out == argv and hits == []
    assert redacted_options(out) == []


def test_secret_options_and_overrides_are_hidden_and_named() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0." + _token(43)
    argv = ["python", "t.py", "--api-key", "s3cr3t-x", "--token=abc12345", "-p", "3", "db.password=hunter22",
            "+api.token=tok-12345", "++a.b.secret=zzz-9999", "-k", "5d41402abc4b2a76b9719d911017c592",
            "--db", "postgres://etl:pa55word@db/x", "--jwt", jwt, "--verbose", "db.user=trainer",
            "--use_auth_token", "True", "--password", "--lr", "0.1"]  # fmt: skip
    out, hits = Redactor().argv(argv)
    assert out == [
        "python", "t.py", "--api-key", REDACTED, f"--token={REDACTED}", "-p", "3", f"db.password={REDACTED}",
        f"+api.token={REDACTED}", f"++a.b.secret={REDACTED}", "-k", REDACTED, "--db",
        f"postgres://etl:{REDACTED}@db/x", "--jwt", REDACTED, "--verbose", "db.user=trainer",
        "--use_auth_token", "True", "--password", "--lr", "0.1",
    ]  # fmt: skip
    named = ["--api-key", "--token", "db.password", "+api.token", "++a.b.secret", "-k", "--db", "--jwt"]
    assert redacted_options(out) == named
    assert "argv:--db (a URL password)" in hits and "argv:-k" in hits


WANDB_KEY = _token(40, "0123456789abcdef")  # under an ambiguous name (`WANDB_KEY`): taken as it looks random


def test_secret_values_of_a_command_and_an_environment() -> None:
    r = Redactor()
    values = r.secret_values(
        {"HF_TOKEN": "hf_" + "a1B2" * 9, "PWD": "/work/project", "KEY": "train", "DATABASE_URL": "mysql://u:dbpw1234@h/d",
         "WANDB_KEY": WANDB_KEY, "OMP_NUM_THREADS": "1"},
        ["python", "t.py", "--api-key", "argkey1", "-p", "1234", "x.secret=sv-1"],
    )  # fmt: skip
    assert values == {
        "hf_" + "a1B2" * 9,
        "dbpw1234",
        WANDB_KEY,
        "argkey1",
        "sv-1",
    }


def test_environment_variables() -> None:
    env, hits = Redactor().env(
        {"WANDB_API_KEY": "k1", "AWS_REGION": "eu", "MY_TOKEN": "t", "DB_PASSWORD": "p",
         "OMP_NUM_THREADS": "1",
         "PROXY": "http://bob:hunter2@proxy:3128", "TOKENIZERS_PARALLELISM": "false", "PWD": "/w",
         "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    )  # fmt: skip
    assert env["WANDB_API_KEY"] == env["MY_TOKEN"] == env["DB_PASSWORD"] == REDACTED
    assert (
        env["AWS_REGION"] == "eu"
        and env["OMP_NUM_THREADS"] == "1"
        and env["TOKENIZERS_PARALLELISM"] == "false"
    )
    assert env["PROXY"] == f"http://bob:{REDACTED}@proxy:3128" and env["PWD"] == "/w"
    assert env["HF_HUB_DISABLE_IMPLICIT_TOKEN"] == "1"  # a switch: `*_TOKEN` in its name, no secret in it
    assert len(hits) == 4


# --------------------------------------------------------------------------- shapes


def test_credential_shapes_are_masked_anywhere_in_text() -> None:
    t = {n: _token(n) for n in (16, 24, 32, 35, 36, 40, 44, 48, 68, 80, 86)}
    hexa = _token(32, "0123456789abcdef")
    aws = _token(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    cases = {  # the text, and its part that must not survive
        "slack webhook": ("https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/" + t[24], t[24]),
        "discord webhook": ("https://discord.com/api/webhooks/123456789012345678/" + t[68], t[68]),
        "teams webhook": (f"https://acme.webhook.office.com/webhookb2/{t[36]}@x/IncomingWebhook/y", t[36]),
        "sas url": (f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={t[44]}", t[44]),
        "jwt": ("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJhY21lIn0." + t[40], t[40]),
        "aws": ("AKIA" + aws, aws),
        "github": ("ghp_" + t[36], t[36]),
        "github fine-grained": (f"github_pat_{t[24]}_{t[48]}", t[48]),
        "slack": ("xoxb-1234567890-" + t[24], t[24]),
        "openai": ("sk-proj-" + t[48], t[48]),
        "anthropic": ("sk-ant-api03-" + t[80], t[80]),
        "hugging face": ("hf_" + t[35], t[35]),
        "google": ("AIza" + t[35], t[35]),
        "azure storage": (f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={t[86]}==;", t[86]),
        "service bus": (
            f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=R;SharedAccessKey={t[44]}",
            t[44],
        ),
        "sql": (f"Server=tcp:x,1433;Database=y;User ID=u;Password={t[16]};Encrypt=true", t[16]),
        "dsn": (f"postgresql://trainer:{t[16]}@db.internal:5432/runs", t[16]),
        "sentry": (f"https://{hexa}@o1.ingest.sentry.io/42", hexa),
        "bearer": (f"Authorization: Bearer {t[40]}", t[40]),
    }
    for name, (text, secret) in cases.items():
        line = f"connecting with {text} now"
        masked, kinds = mask_shapes(line)
        assert REDACTED in masked and kinds and secret not in masked, (name, masked)


@pytest.mark.parametrize(
    "kind",
    ["RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", "", "PGP "],
)
def test_private_key_blocks_are_masked_whole(kind: str) -> None:
    block = (
        _key_block(kind)
        if kind != "PGP "
        else _key_block("PGP ", "PGP ").replace("KEY-----", "KEY BLOCK-----")
    )
    masked, kinds = mask_shapes("before\n" + block + "after\n")
    assert masked == f"before\n{REDACTED}\nafter\n" and kinds == ["a private key"]
    escaped = json.dumps({"private_key": block})  # a service-account JSON printed or pasted: `\n` escapes
    assert "PRIVATE KEY" not in mask_shapes(escaped)[0]


def test_ordinary_text_and_code_keep_their_bytes() -> None:
    for text in (
        "git@github.com:org/repo.git", "ssh://git@github.com/org/repo", "https://huggingface.co/gpt2",
        "epoch 3 loss 0.1234 tokens/s 1200", "password=args.password",
        'key = "-----BEGIN RSA PRIVATE KEY-----"',
        "if line.startswith('-----BEGIN OPENSSH PRIVATE KEY-----'):", "risk-averse-learning-rate-schedule-v2",
        "pip install git+https://github.com/huggingface/transformers@main", "sk-learn",
        "Basic MultiHeadAttention",
        "mongodb://localhost:27017/db", "hf_hub_download(repo_id='gpt2')",
    ):  # fmt: skip
        assert mask_shapes(text) == (text, []), text


def test_printed_assignments_are_masked_in_logs_not_in_code() -> None:
    line = "Namespace(api_key='ak-123456', lr=0.1) password: hunter22 {'access_token': 'tok-98765'}"
    masked = Masker().text(line)
    assert "ak-123456" not in masked and "hunter22" not in masked and "tok-98765" not in masked
    assert "lr=0.1" in masked
    code = "db = connect(password=args.password, api_key=os.environ['API_KEY'])\n"
    assert Masker().data(code.encode(), printed=False) == code.encode()


def test_strip_url_credentials_for_identities() -> None:
    assert strip_url_credentials("git@github.com:org/repo.git") == "git@github.com:org/repo.git"
    assert strip_url_credentials("https://tok@github.com/o/r.git") == "https://github.com/o/r.git"
    assert strip_url_credentials("https://alice:pw@git.example.com/r") == "https://git.example.com/r"


# --------------------------------------------------------------------------- files


def test_secret_files_by_name() -> None:
    for name in (".env", ".env.local", "id_rsa", "keys/server.pem", "gcp/service-account-prod.json", "a.ppk"):
        assert is_secret_file(name), name
    for name in ("train.py", "environment.yml", "data/keys.csv", "tokenizer.json"):
        assert not is_secret_file(name), name


def test_a_key_is_found_in_a_file_of_any_name_and_size(tmp_path: Path) -> None:
    filler = "".join(f"line {i}: nothing secret here, just notes about the run\n" for i in range(60_000))
    cases = {
        "notes.txt": "notes\n" * 2000 + _key_block("OPENSSH "),
        "big.md": filler + _key_block(),  # 3.4 MB of text first: past the first chunks
        "pgp.dat": _key_block("PGP ", "PGP ").replace("KEY-----", "KEY BLOCK-----"),
        "putty.txt": "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: x\nPublic-Lines: 1\n",
        "sa.txt": json.dumps({"type": "service_account", "private_key": _key_block("")}),
        "legacy.py": f'KEY = """{_key_block("EC ")}"""\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert credential_in_file(tmp_path / name) is not None, name
    assert credential_in_file(tmp_path / "sa.txt") == "a cloud service-account file"
    boundary = tmp_path / "boundary.txt"  # the key's marker straddles the 1 MiB chunk boundary
    block = _key_block()
    boundary.write_text("x" * ((1 << 20) - 10) + "\n" + block)
    assert credential_in_file(boundary) == "a private key"
    parser = tmp_path / "pem.py"
    parser.write_text(
        'MARK = "-----BEGIN RSA PRIVATE KEY-----"\nEND = "-----END RSA PRIVATE KEY-----"\n' + filler[:5000]
    )
    assert credential_in_file(parser) is None


# --------------------------------------------------------------------------- configs


def test_config_secrets_in_every_layout(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "lr: 0.1\ndatabase:\n  password: \"a,b,c-1\"\npw: pw-short\n"
        "ssh_key: |\n  block-line-one\n  block-line-two\n"
        "credentials:\n  - cred-one\n  - {user: trainer, pass: cred-two}\nauth:\n  token: auth-tok-1\n"
        "model:\n  pad_token: '<pad>'\n  key_dim: 64\napi_key: ${oc.env:API_KEY}\ntoken: ???\n"
    )  # fmt: skip
    found = config_secrets(tmp_path / "c.yaml")
    assert {"a,b,c-1", "pw-short", "block-line-one", "block-line-two", "cred-one", "trainer", "cred-two",
            "auth-tok-1"} <= found  # fmt: skip
    assert not {"<pad>", "64", "${oc.env:API_KEY}", "???", "0.1"} & found
    (tmp_path / "c.json").write_text('{"service": {"apiKey": "json-key-1", "passwd": "json-pw-1", "n": 3}}')
    assert config_secrets(tmp_path / "c.json") == {"json-key-1", "json-pw-1"}
    (tmp_path / "c.toml").write_text(
        '[wandb]\nproject = "p"\napi_key = "toml-key-1"\n[db]\npwd = "toml-pw-1"\n'
    )
    assert config_secrets(tmp_path / "c.toml") == {"toml-key-1", "toml-pw-1"}
    (tmp_path / "c.ini").write_text("[default]\naws_secret_access_key = ini-secret-1\nregion = eu\n")
    assert config_secrets(tmp_path / "c.ini") == {"ini-secret-1"}
    (tmp_path / "broken.yaml").write_text("a: [unclosed\n")
    assert config_secrets(tmp_path / "broken.yaml") == set()


def test_a_run_masker_masks_config_values_in_logs_and_params(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("db:\n  password: 'p,ss-w0rd'\n")
    masker = run_masker({"HF_TOKEN": "hf-env-token-1"}, ["python", "t.py", "--api-key", "argk-1"],
                        [tmp_path / "c.yaml"], Redactor())  # fmt: skip
    log = b"db p,ss-w0rd env hf-env-token-1 arg argk-1 loss 0.5\n"
    assert masker.data(log, "the logs") == b"db *** env *** arg *** loss 0.5\n"
    params = {"api_key": "x", "lr": 0.1, "nested": {"secret": [1234, 5678], "k": 3},
              "credentials": {"u": "a"}, "note": "from hf-env-token-1", "tokenizer": "gpt2", "flag": True,
              "password": None}  # fmt: skip
    assert masker.obj(params, "params") == {
        "api_key": REDACTED, "lr": 0.1, "nested": {"secret": [REDACTED, REDACTED], "k": 3},
        "credentials": {"u": REDACTED}, "note": f"from {REDACTED}", "tokenizer": "gpt2", "flag": True,
        "password": None,
    }  # fmt: skip
    assert masker.masked == {"the logs", "params"}
