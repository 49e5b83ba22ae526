"""Fake credentials in the shapes real projects leak them, planted where a run meets them.

Every value is made here from a fixed seed (realistic formats, never a working credential), and
`PLANTED` lists the strings that must be found nowhere: a value, or for a key block a line of
its body. `ORDINARY` is a training command line that holds no secret at all.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

_rng = random.Random(20240522)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HEX = "0123456789abcdef"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64(n: int) -> str:
    return base64.b64encode(_rng.randbytes(n)).decode()


def _jwt() -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    payload = {"sub": _r(12), "iss": "auth.acme.example", "exp": 1900000000}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(payload)}.{_r(43, _ALNUM + '-_')}"


def _armoured(begin: str, end: str, headers: str = "", lines: int = 12) -> tuple[str, str]:
    """A key block of random base64 lines, and one line of its body to search for."""
    body = [_b64(48) for _ in range(lines)]
    return f"{begin}\n{headers}{chr(10).join(body)}\n{end}\n", body[3]


def _putty() -> tuple[str, str]:
    private = [_b64(48) for _ in range(6)]
    text = (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@ci\n"
        f"Public-Lines: 2\n{_b64(48)}\n{_b64(20)}\nPrivate-Lines: 6\n" + "\n".join(private)
        + f"\nPrivate-MAC: {_r(64, _HEX)}\n"
    )  # fmt: skip
    return text, private[2]


# --------------------------------------------------------------------------- values

HF = "hf_" + _r(34)
GHP = "ghp_" + _r(36)
SK_PROJ = "sk-proj-" + _r(48, _ALNUM + "_-")
SK_POS = "sk-" + _r(48)
SLACK_BOT = "xoxb-" + _r(12, "0123456789") + "-" + _r(13, "0123456789") + "-" + _r(24)
AKIA = "AKIA" + _r(16, _UPPER)
WANDB_KEY = _r(40, _HEX)
SENTRY_KEY = _r(32, _HEX)
ACCOUNT_KEY = _b64(64)
ACCOUNT_KEY_2 = _b64(64)
SB_KEY = _b64(32)
SLACK_HOOK = f"T{_r(10, _UPPER)}/B{_r(10, _UPPER)}/{_r(24)}"
DISCORD_HOOK = f"{_r(18, '0123456789')}/{_r(68, _ALNUM + '-_')}"
TEAMS_HOOK = (
    f"{_r(8, _HEX)}-{_r(4, _HEX)}-4{_r(3, _HEX)}@{_r(8, _HEX)}/IncomingWebhook/{_r(32, _HEX)}/{_r(8, _HEX)}"
)
JWT_ENV = _jwt()
JWT_ARG = _jwt()
JWT_PRINTED = _jwt()
RANDOM_K = _r(40, _HEX)  # under `-k`: an ambiguous name, a value that looks like a key
DB_URL_PASS = "Pg" + _r(14)
ARG_DB_PASS = "Ar" + _r(14)
SQL_PASS = "Sq" + _r(12) + "!9"

OPENSSH, OPENSSH_LINE = _armoured("-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----")
PGP, PGP_LINE = _armoured(
    "-----BEGIN PGP PRIVATE KEY BLOCK-----", "-----END PGP PRIVATE KEY BLOCK-----", "Comment: backup key\n\n"
)
PUTTY, PUTTY_LINE = _putty()
RSA, RSA_LINE = _armoured("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----")
EC, EC_LINE = _armoured("-----BEGIN EC PRIVATE KEY-----", "-----END EC PRIVATE KEY-----", lines=4)
ENCRYPTED, ENCRYPTED_LINE = _armoured(
    "-----BEGIN ENCRYPTED PRIVATE KEY-----", "-----END ENCRYPTED PRIVATE KEY-----"
)
SA_KEY, SA_LINE = _armoured("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----")
SA_KEY_ID = _r(40, _HEX)

NOTES_TOKEN = "hf_" + _r(34)
SENTRY_KEY_2 = _r(32, _HEX)
GITCRED, PGPASS, NETRC = "gitcred-" + _r(12), "pgpass-" + _r(12), "netrc-" + _r(12)
ENV_FILE_TOKEN, HELPER_TOKEN = "envfile-" + _r(14), "hf_" + _r(34)

ENV = {
    "HF_TOKEN": HF,
    "WANDB_API_KEY": WANDB_KEY,
    "HF_HUB_TKN": "hubtkn-" + _r(16),
    "WANDB_PASS": "wbpass-" + _r(12),
    "HF_PAT": "hfpat-" + _r(14),
    "AWS_SECRET_ACCESS_KEY": _r(40, _ALNUM + "/+"),
    "AWS_ACCESS_KEY_ID": AKIA,
    "DB_PASSWORD": "dbpw-" + _r(12),
    "GITHUB_TOKEN": GHP,
    "OPENAI_API_KEY": SK_PROJ,
    "MY_SERVICE_SECRET": "svc-" + _r(16),
    "DATABASE_URL": f"postgresql://trainer:{DB_URL_PASS}@db.internal:5432/runs",
    "SENTRY_DSN": f"https://{SENTRY_KEY}@o450123.ingest.sentry.io/5512345",
    "AZURE_STORAGE_CONNECTION_STRING": (
        f"DefaultEndpointsProtocol=https;AccountName=acmeml;AccountKey={ACCOUNT_KEY};"
        "EndpointSuffix=core.windows.net"
    ),
    "SLACK_WEBHOOK_URL": f"https://hooks.slack.com/services/{SLACK_HOOK}",
    "SLACK_BOT_TOKEN": SLACK_BOT,
    "SERVICE_JWT": JWT_ENV,
    "MLFLOW_TRACKING_PASSWORD": "mlflow-" + _r(14),
    "SSH_PASSPHRASE": "phrase-" + _r(14),
    "NOTES": f"hub access with {NOTES_TOKEN} for the eval job",
}

HYDRA_DB = "hydra-db-" + _r(12)
HYDRA_API = "hydra-api-" + _r(12)
HYDRA_SECRET = "hydra-sec-" + _r(12)
ARGV_VALUES = {
    "--api-key": "argkey-" + _r(14),
    "--token": "argtok-" + _r(14),
    "--password": "argpw-" + _r(14),
    "--passphrase": "argphrase-" + _r(10),
}
ARGV = [
    SK_POS,
    "--api-key", ARGV_VALUES["--api-key"],
    f"--token={ARGV_VALUES['--token']}",
    "--password", ARGV_VALUES["--password"],
    "--passphrase", ARGV_VALUES["--passphrase"],
    "--db", f"postgres://etl:{ARG_DB_PASS}@warehouse.internal/feature_store",
    "--sentry-dsn", f"https://{SENTRY_KEY_2}@o77.ingest.sentry.io/99",
    "--webhook", f"https://discord.com/api/webhooks/{DISCORD_HOOK}",
    "--teams-hook", f"https://acme.webhook.office.com/webhookb2/{TEAMS_HOOK}",
    "--storage", f"DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={ACCOUNT_KEY_2};"
                 "EndpointSuffix=core.windows.net",
    "--bus", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
             f"SharedAccessKey={SB_KEY}",
    "--sql", f"Server=tcp:acme.database.windows.net,1433;Database=runs;User ID=trainer;Password={SQL_PASS};"
             "Encrypt=true;",
    "--auth-jwt", JWT_ARG,
    "-k", RANDOM_K,
    f"db.password={HYDRA_DB}",
    f"+api.token={HYDRA_API}",
    f"++logging.wandb.secret={HYDRA_SECRET}",
    "--config", "conf/train.yaml",
    "--extra", "conf/service.json",
    "--toml", "conf/tracking.toml",
    "-p", "3",
    "--pos-weight", "2.0",
]  # fmt: skip

# Config files named in argv, secrets in layouts a line regex misses.
YAML_COMMA = "yc-" + _r(8) + ",with,commas"
YAML_PW = "ypw-" + _r(12)
YAML_BLOCK_1, YAML_BLOCK_2 = "yblk-" + _r(20), "yblk-" + _r(20)
YAML_CRED_1, YAML_CRED_2 = "ycred-" + _r(14), "ycred-" + _r(14)
YAML_NESTED = "ynest-" + _r(14)
JSON_KEY, JSON_PASSWD = "jkey-" + _r(16), "jpw-" + _r(14)
TOML_KEY, TOML_PWD = "tkey-" + _r(16), "tpwd-" + _r(12)
CONFIGS = {
    "conf/train.yaml": (
        "lr: 0.05\nepochs: 2\ntokenizer: gpt2\n"
        f'database:\n  host: db.internal\n  password: "{YAML_COMMA}"\n'
        f"pw: {YAML_PW}\n"
        f"ssh_key: |\n  {YAML_BLOCK_1}\n  {YAML_BLOCK_2}\n"
        f"credentials:\n  - {YAML_CRED_1}\n  - {YAML_CRED_2}\n"
        f"services:\n  s3:\n    bucket: acme-ml\n    secret_access_key: {YAML_NESTED}\n"
        "model:\n  key_dim: 64\n  pad_token: '<pad>'\n"
    ),
    "conf/service.json": json.dumps(
        {
            "service": {
                "url": "https://api.acme.example",
                "apiKey": JSON_KEY,
                "passwd": JSON_PASSWD,
                "retries": 3,
            }
        }
    ),  # fmt: skip
    "conf/tracking.toml": (
        f'[wandb]\nproject = "acme-vision"\napi_key = "{TOML_KEY}"\n\n[db]\npwd = "{TOML_PWD}"\n'
    ),
}
# A Hydra config group file the command does not name: a code file, masked by its keys.
GROUP_PASSWORD = "grp-" + _r(16)
CODE_CONFIG = ("conf/db/prod.yaml", f"host: db.prod.internal\nuser: trainer\npassword: {GROUP_PASSWORD}\n")

# Credential files under other names; `notes/deploy.txt` holds its key after 12 KB of notes, and
# `docs/big_notes.txt` after 3 MB.
FILLER = "".join(
    f"step {i}: loss went down, lr stays at 0.05, nothing else to note here.\n" for i in range(180)
)
SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "project_id": "acme-ml", "private_key_id": SA_KEY_ID, "private_key": SA_KEY,
     "client_email": "trainer@acme-ml.iam.gserviceaccount.com"}, indent=2,
)  # fmt: skip
KEY_FILES = {
    "notes/deploy.txt": FILLER + "\ndeploy key for the cluster:\n" + OPENSSH,
    "backup/keyring.dat": PGP,
    "tools/ci_key.txt": PUTTY,
    "gcp/account.txt": SERVICE_ACCOUNT,
    "legacy_auth.py": f'"""Old login helper."""\n\nKEY = """{EC}"""\n',
    "docs/big_notes.txt": FILLER * 260 + RSA,
    "certs/bundle.crt": ENCRYPTED,
}
NAMED_FILES = {
    ".git-credentials": f"https://trainer:{GITCRED}@github.com\n",
    ".pgpass": f"db.internal:5432:runs:trainer:{PGPASS}\n",
    ".netrc": f"machine hub.acme.example login me password {NETRC}\n",
}
ENV_FILE_COMMITTED = "API_TOKEN=committed-before\n"
ENV_FILE_NEW = f"API_TOKEN={ENV_FILE_TOKEN}\n"  # a tracked .env, modified after the commit
HELPER_NEW = f'HUB = "{HELPER_TOKEN}"\n'  # a tracked file whose patch holds a token

# What the script prints and logs that repro cannot know in advance.
PRINTED_SECRET = "printed-" + _r(16)  # printed as `password: …` from a file repro never parsed
PRINTED_JWT = JWT_PRINTED

_SHOWN_WHOLE = ("DATABASE_URL", "SENTRY_DSN", "AZURE_STORAGE_CONNECTION_STRING", "SLACK_WEBHOOK_URL", "NOTES")
PLANTED = sorted(
    {
        *(v for k, v in ENV.items() if k not in _SHOWN_WHOLE),
        DB_URL_PASS, SENTRY_KEY, ACCOUNT_KEY, SLACK_HOOK, NOTES_TOKEN,
        *ARGV_VALUES.values(), SK_POS, ARG_DB_PASS, SENTRY_KEY_2, DISCORD_HOOK, TEAMS_HOOK, ACCOUNT_KEY_2,
        SB_KEY, SQL_PASS, JWT_ARG, RANDOM_K, HYDRA_DB, HYDRA_API, HYDRA_SECRET,
        YAML_COMMA, YAML_PW, YAML_BLOCK_1, YAML_BLOCK_2, YAML_CRED_1, YAML_CRED_2, YAML_NESTED,
        JSON_KEY, JSON_PASSWD, TOML_KEY, TOML_PWD, GROUP_PASSWORD,
        OPENSSH_LINE, PGP_LINE, PUTTY_LINE, SA_LINE, SA_KEY_ID, EC_LINE, RSA_LINE, ENCRYPTED_LINE,
        GITCRED, PGPASS, NETRC, ENV_FILE_TOKEN, HELPER_TOKEN, PRINTED_SECRET, PRINTED_JWT,
    }
)  # fmt: skip

# An ordinary training command: argparse flags that only look like credentials to a name rule,
# Hydra-style overrides that are not credentials, a W&B project, a checkpoint to resume from.
ORDINARY = [
    "-p", "3", "--pos-weight", "2.0", "--key-dim", "64", "--tokenizer", "gpt2", "--pad-token", "<pad>",
    "--csv-img-key", "filepath", "--max-new-tokens", "20", "--use_auth_token",
    "--wandb-project", "acme-vision", "--resume", "checkpoints/last.pt", "--sort-key", "length", "-k", "5",
    "model.lr=0.05", "trainer.max_epochs=2", "+data.num_workers=0", "++optim.token_budget=4096",
    "tokenizer.name=bert-base-uncased",
]  # fmt: skip


def leaks(root: Path, values: list[str]) -> dict[str, list[str]]:
    """Each of ``values`` found in a file under ``root``, with the files (relative to root) that hold it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for value in values:
            if value.encode() in data:
                found.setdefault(value, []).append(str(path.relative_to(root)))
    return found
