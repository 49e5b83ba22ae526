"""Keep secrets out of records: credential-looking names, URLs with passwords, secret files."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

REDACTED = "***"

# Names (env vars, argv option names) that look like credentials; case-insensitive globs.
DEFAULT_NAME_PATTERNS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "PASS",
    "*_PASS",
    "*_PASS_*",
    "PW",
    "*_PW",
    "P",  # `-p`: a password option in most CLIs that take one
    "*_TKN",
    "*TKN*",
    "TOK",
    "*_TOK",
    "*_PAT",
    "PAT",
    "*_KEY",
    "*-KEY",
    "*APIKEY*",
    "*API_KEY*",
    "KEY",
    "AWS_*",
    "*CREDENTIAL*",
    "*PRIVATE*",
    "*AUTH*",
    "*SESSION*",
    "*COOKIE*",
    "WANDB_API_KEY",
    "HF_TOKEN",
)

# Files that never enter a code snapshot.
SECRET_FILE_PATTERNS = (
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    ".netrc",
    ".pypirc",
    ".npmrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "credentials",
    "credentials.*",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".dockercfg",
    "*.tfvars",
    "*.keystore",
    "*secret*",
    "service-account*.json",
)

# Values that are credentials by their shape, whatever name they are given under.
TOKEN_SHAPES = re.compile(
    r"(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"  # OpenAI / Anthropic
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35})"  # Google API key
)

# JSON/YAML/INI keys in config files whose values are secrets (`api_key: x`, `"token": "x"`).
_CONFIG_SECRET = re.compile(
    r"""(?im)^[ \t"']{0,64}(?P<key>[A-Za-z0-9_.-]{0,64}(?:key|token|secret|passw(?:or)?d|passphrase|pass|"""
    r"""pwd|tkn|pat|credential|auth)[A-Za-z0-9_.-]{0,64})["']?[ \t]{0,16}[:=][ \t]{0,16}["']?"""
    r"""(?P<value>[^"'\s,#}]{4,512})"""
)
_MIN_SECRET = 4  # shorter values would mask ordinary text

# `scheme://user:password@host`, matched from the literal `://` with bounded repeats: a long
# line of text must not cost n² steps.
_URL_CRED = re.compile(r"://(?P<cred>[^/@\s:]{1,256}(?::[^/@\s]{0,256})?)@")
_URL_CRED_BYTES = re.compile(_URL_CRED.pattern.encode())
_TOKEN_BYTES = re.compile(TOKEN_SHAPES.pattern.encode())
_TOKEN_PREFIXES = (b"sk-", b"gho_", b"ghp_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"hf_", b"glpat-",
                   b"xox", b"AKIA", b"AIza")  # fmt: skip


@dataclass(frozen=True)
class Redactor:
    """Applies the name patterns (defaults plus a project's own)."""

    extra: tuple[str, ...] = ()
    patterns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(p.upper() for p in (*DEFAULT_NAME_PATTERNS, *self.extra)))

    def is_secret_name(self, name: str) -> bool:
        upper = name.upper().lstrip("-")
        return any(fnmatch.fnmatchcase(upper, p) or fnmatch.fnmatchcase(upper.replace("-", "_"), p)
                   for p in self.patterns)  # fmt: skip

    def env(self, variables: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """Redact variables by name and strip URL credentials from the rest."""
        out: dict[str, str] = {}
        hits: list[str] = []
        for name, value in variables.items():
            if self.is_secret_name(name):
                out[name] = REDACTED
                hits.append(f"env:{name}")
            else:
                clean = TOKEN_SHAPES.sub(REDACTED, strip_url_credentials(value))
                if clean != value:
                    hits.append(f"env:{name} (credentials in the value)")
                out[name] = clean
        return out, hits

    def secret_values(self, environ: dict[str, str], argv: list[str]) -> set[str]:
        """Every secret value in an environment and a command line: values of
        credential-looking names, URL passwords, token-shaped values."""
        values: set[str] = set()
        for name, value in environ.items():
            if self.is_secret_name(name):
                values.add(value)
            values.update(_embedded(value))
        for arg, secret in self._argv_secrets(argv):
            if secret is not None:
                values.add(secret)
            values.update(_embedded(arg))
        return {v for v in values if len(v) >= _MIN_SECRET}

    def argv(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """Redact values of credential-looking options (`--api-key X`, `--token=X`) and URL passwords."""
        out: list[str] = []
        hits: list[str] = []
        option = ""
        for arg, secret in self._argv_secrets(argv):
            if secret is not None and secret is arg:  # the value of the option before it
                out.append(REDACTED)
                hits.append(f"argv:{option}")
            elif secret is not None:  # --name=value
                name = arg.partition("=")[0]
                out.append(f"{name}={REDACTED}")
                hits.append(f"argv:{name}")
            else:
                option = arg
                clean = strip_url_credentials(arg)
                if clean != arg:
                    hits.append("argv:URL credentials")
                shaped = TOKEN_SHAPES.sub(REDACTED, clean)
                if shaped != clean:
                    hits.append("argv:token-shaped value")
                out.append(shaped)
        return out, hits

    def _argv_secrets(self, argv: list[str]) -> Iterator[tuple[str, str | None]]:
        """Each argument with the secret it carries by the one option rule, or None:
        the value of `--token=X`, or the whole argument after `--api-key`."""
        value_next = False
        for arg in argv:
            if value_next:
                value_next = False
                yield arg, arg
            elif arg.startswith("-") and "=" in arg:
                name, _, value = arg.partition("=")
                yield arg, value if self.is_secret_name(name) else None
            else:
                value_next = arg.startswith("-") and self.is_secret_name(arg)
                yield arg, None


def _embedded(text: str) -> set[str]:
    """Secrets inside a value: URL user:password parts and token-shaped substrings."""
    found = {m.group(0) for m in TOKEN_SHAPES.finditer(text)}
    for m in _URL_CRED.finditer(text):
        user, _, password = m.group("cred").partition(":")
        found.update(v for v in (password, user if not password else "") if v)
    return found


def config_secrets(text: str) -> set[str]:
    """Values of credential-looking keys in a config file's text (`api_key: x`)."""
    return {m.group("value") for m in _CONFIG_SECRET.finditer(text) if len(m.group("value")) >= _MIN_SECRET}


class Masker:
    """Replaces known secret values (and token-shaped strings, URL passwords) with ``***``.

    Built once per run from the environment, the command line and its config files, and
    applied to everything the run stores: logs, params, metrics, patches, config copies.
    """

    def __init__(self, values: set[str] | frozenset[str] = frozenset()) -> None:
        self.values = sorted({v for v in values if len(v) >= _MIN_SECRET}, key=len, reverse=True)
        self._text = re.compile("|".join(re.escape(v) for v in self.values)) if self.values else None
        self._encoded = [v.encode("utf-8", "surrogateescape") for v in self.values]
        self.masked: set[str] = set()  # where something was masked, for the record

    def add(self, values: set[str]) -> Masker:
        return Masker(set(self.values) | values)

    def text(self, value: str, where: str = "") -> str:
        out = self._text.sub(REDACTED, value) if self._text is not None else value
        out = TOKEN_SHAPES.sub(REDACTED, strip_url_credentials(out))
        if out != value and where:
            self.masked.add(where)
        return out

    def data(self, raw: bytes, where: str = "") -> bytes:
        out = raw
        present = [v for v in self._encoded if v in raw]  # a substring search per value is fast
        if present:
            out = re.compile(b"|".join(re.escape(v) for v in present)).sub(REDACTED.encode(), out)
        if any(prefix in out for prefix in _TOKEN_PREFIXES):  # substring checks before the regex
            out = _TOKEN_BYTES.sub(REDACTED.encode(), out)
        if b"://" in out:
            out = _URL_CRED_BYTES.sub(b"://", out)
        if out != raw and where:
            self.masked.add(where)
        return out

    def obj(self, value: Any, where: str = "", key: str = "") -> Any:
        """Mask every string in nested data; a value under a credential-looking key goes whole."""
        if key and isinstance(value, (str, int, float)) and Redactor().is_secret_name(key):
            if where:
                self.masked.add(where)
            return REDACTED
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, dict):
            return {k: self.obj(v, where, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.obj(v, where) for v in value]
        return value


def strip_url_credentials(text: str) -> str:
    """`https://user:pw@host/x` → `https://host/x` (anywhere in the text)."""
    return _URL_CRED.sub("://", text)


def is_secret_file(relpath: str) -> bool:
    """Whether a file (by its name) looks like it holds credentials."""
    name = relpath.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILE_PATTERNS)


# Cloud credential files under any name, recognised by what they hold.
_CREDENTIAL_CONTENT = re.compile(
    rb'"type"\s*:\s*"(?:service_account|authorized_user|external_account)"'
    rb'|"private_key"\s*:|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----'
    rb"|aws_secret_access_key\s*=|\"client_secret\"\s*:"
)


def is_credential_content(head: bytes) -> bool:
    """Whether a file's first bytes look like a credential (service-account JSON, a private key)."""
    return bool(_CREDENTIAL_CONTENT.search(head))
