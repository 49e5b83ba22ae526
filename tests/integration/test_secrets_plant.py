"""38 secret values planted in the environment, argv, files, printed output, logged params and a
config file; a real run and its export must hold none of them, anywhere (bytes, not fields)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Project

HF = "hf_PlantedHubTokenValue0001abcdEFGH"
GHP = "ghp_" + "PlantedGithubToken0008" + "x" * 14
SK = "sk-proj-PlantedOpenAiKey0009abcdef"
SK_POS = "sk-PlantedPositionalKey0013abcdef"
SLACK = "xoxb-PlantedSlack0031-abcdef"
GOOGLE = "AIza" + "PlantedGoogleKey0037" + "a" * 15

ENV = {
    "HF_TOKEN": HF,
    "WANDB_API_KEY": "wandbkey0000000000002",
    "HF_HUB_TKN": "hubtkn-value-0003",
    "WANDB_PASS": "wandb-pass-0004",
    "HF_PAT": "hf-pat-value-0005",
    "AWS_SECRET_ACCESS_KEY": "awssecret0006xyz",
    "DB_PASSWORD": "dbpassword0007",
    "GITHUB_TOKEN": GHP,
    "OPENAI_API_KEY": SK,
    "MY_SERVICE_SECRET": "svc-secret-0010",
    "DATABASE_URL": "postgres://admin:urlpass0011@db.internal/x",
    "NOTES": "see hf_NotesTokenValue0012abcdEFGH for access",
    "SLACK_BOT_TOKEN": SLACK,
    "HUGGINGFACE_HUB_TOKEN": "hfhubtoken0032",
    "COMET_API_KEY": "cometkey0033",
    "NEPTUNE_API_TOKEN": "neptunetoken0034",
    "MLFLOW_TRACKING_PASSWORD": "mlflowpass0035",
    "AZURE_STORAGE_KEY": "azurekey0036",
    "GOOGLE_API_KEY": GOOGLE,
    "SSH_PASSPHRASE": "sshphrase0038",
}
ARGV = [
    SK_POS, "--pw", "pwvalue0014", "--hf-tok", "hftokvalue0015", "-p", "pvalue0016",
    "--passphrase", "passphrase0017", "--api-key", "apikey0018", "--token=tokenvalue0019",
    "--db", "postgres://u:dbargpass0020@h/db", "--config", "config.yaml",
]  # fmt: skip
FILES = {
    "config.yaml": (
        'lr: 0.1\napi_key: cfgapikey0021\npassword: cfgpassword0022\nauth:\n  token: "cfgtoken0023"\n'
    ),
    ".git-credentials": "https://user:gitcred0025@github.com\n",
    ".pgpass": "db.internal:5432:train:user:pgpass0026\n",
    "gcp-prod.json": json.dumps(
        {"type": "service_account", "private_key_id": "keyid0028",
         "private_key": "-----BEGIN PRIVATE KEY-----\nprivkey0027\n-----END PRIVATE KEY-----\n"}
    ),  # fmt: skip
    ".netrc": "machine hub login me password netrc0029\n",
    "settings.ini": "[default]\naws_secret_access_key = inisecret0030\n",
}
ENV_FILE_NEW = "API_TOKEN=envfile0024\n"  # a tracked .env, modified after the commit
HELPER_NEW = 'HUB = "hf_HelperPatchToken0039abcdEFGH"\n'  # a tracked file whose patch holds a token

PLANTED = [
    *(v for k, v in ENV.items() if k not in ("DATABASE_URL", "NOTES")),
    "urlpass0011", "hf_NotesTokenValue0012abcdEFGH",
    SK_POS, "pwvalue0014", "hftokvalue0015", "pvalue0016", "passphrase0017", "apikey0018", "tokenvalue0019",
    "dbargpass0020", "cfgapikey0021", "cfgpassword0022", "cfgtoken0023", "envfile0024", "gitcred0025",
    "pgpass0026", "privkey0027", "keyid0028", "netrc0029", "inisecret0030", "hf_HelperPatchToken0039abcdEFGH",
]  # fmt: skip


def _leaks(root: Path, values: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for value in values:
            if value.encode() in data:
                found.setdefault(value, []).append(str(path.relative_to(root)))
    return found


def test_planted_secrets_leak_nowhere(project: Project, tmp_path: Path) -> None:
    assert len(set(PLANTED)) >= 38
    project.script("secret_train.py", "train.py")
    project.write(".env", "API_TOKEN=committed-before\n")
    project.write("helpers.py", "HUB = None\n")
    project.commit("train")
    for rel, text in FILES.items():
        project.write(rel, text)
    project.write(".env", ENV_FILE_NEW)
    project.write("helpers.py", HELPER_NEW)
    run = project.repro("run", "--backend", "local", "--", "python", "train.py", *ARGV, env=ENV)
    assert run.code == 0, run.err
    tar = tmp_path / "export" / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0

    assert _leaks(tar.parent, PLANTED) == {}
    assert _leaks(project.root / ".repro", PLANTED) == {}
    assert (project.root / "model.pt").is_file()  # the script really trained

    show = project.repro("show", "latest")
    assert "masked in the logs" in show.out and "logged params" in show.out and "config file" in show.out
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert {".git-credentials", ".pgpass", ".netrc", "gcp-prod.json", "settings.ini", ".env"} <= set(
        record["code"]["excluded"]
    )
    assert record["results"]["params"]["lr"] == 0.1 and record["results"]["params"]["api_key"] == "***"
    assert any(".env" in w["message"] and w["code"] == "secret_changes_excluded" for w in record["warnings"])
