"""Keep secrets out of records: credential-looking names, URLs with passwords, secret files."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

REDACTED = "***"

# Names (env vars, argv option names) that look like credentials; case-insensitive globs.
DEFAULT_NAME_PATTERNS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
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
    "*secret*",
    "service-account*.json",
)

_URL_CRED = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<cred>[^/@\s:]+(?::[^/@\s]*)?)@")


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
                clean = strip_url_credentials(value)
                if clean != value:
                    hits.append(f"env:{name} (URL credentials)")
                out[name] = clean
        return out, hits

    def argv(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """Redact values of credential-looking options (`--api-key X`, `--token=X`) and URL passwords."""
        out: list[str] = []
        hits: list[str] = []
        redact_next = False
        for arg in argv:
            if redact_next:
                out.append(REDACTED)
                redact_next = False
                continue
            if arg.startswith("-") and "=" in arg:
                name, _, value = arg.partition("=")
                if self.is_secret_name(name):
                    out.append(f"{name}={REDACTED}")
                    hits.append(f"argv:{name}")
                    continue
            elif arg.startswith("-") and self.is_secret_name(arg):
                out.append(arg)
                redact_next = True
                hits.append(f"argv:{arg}")
                continue
            clean = strip_url_credentials(arg)
            if clean != arg:
                hits.append("argv:URL credentials")
            out.append(clean)
        return out, hits


def strip_url_credentials(text: str) -> str:
    """`https://user:pw@host/x` → `https://host/x` (anywhere in the text)."""
    return _URL_CRED.sub(lambda m: m.group("scheme"), text)


def is_secret_file(relpath: str) -> bool:
    """Whether a file (by its name) looks like it holds credentials."""
    name = relpath.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILE_PATTERNS)
