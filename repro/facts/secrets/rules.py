"""The one home of the secret rules: which names hold credentials, and which text is one by its shape.

Names (options, environment variables, config keys, Hydra override keys, logged params) are
split into words (`--hf-tok`, `db.password`, `AccountKey`, `WANDB_API_KEY`) and judged in
three classes:

- ``secret``: the name is unambiguous (`--password`, `--api-key`, `--token`, `db.password`,
  `pw:`, `credentials:`, `WANDB_API_KEY`, `hub_token`): its value is hidden whole;
- ``ambiguous``: the name may or may not hold a credential (`-p` patience/port/processes, `-k`,
  `--key`, `--pat`, `--csv-img-key`, `pad_token`, `auth`): its value is hidden only when it
  looks like one (a known token shape, or a long random-looking string);
- ``plain``: everything else, a descriptor such as `--token-file` or `--key-dim` included.

Wherever they stand (argv, params, env, logs, config copies, code files) values are judged by
their shape too: private-key blocks of every armour (PEM, OpenSSH, PGP, PuTTY), JWTs, well-known
token formats (AWS, GitHub, GitLab, Slack, OpenAI/Anthropic, Hugging Face, Google, npm, PyPI,
Stripe, SendGrid, Telegram), chat webhooks (Slack, Discord, Teams) and signed URLs, passwords
in URLs and DSNs (`scheme://user:pass@host`, a token as user), and the key fields of
`;`-separated connection strings (`AccountKey=`, `SharedAccessKey=`, `Password=`).
"""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

REDACTED = "***"
MIN_SECRET = 4  # a known value shorter than this is not searched for in text: it would mask ordinary words

NameVerdict = Literal["secret", "ambiguous", "plain"]

# --------------------------------------------------------------------------- names

# A name holding one of these words is a credential, wherever the word stands.
SECRET_WORDS = frozenset(
    "password passwords passwd passphrase pwd pw secret secrets credential credentials creds "
    "apikey privatekey accesskey secretkey accountkey sharedaccesskey masterkey authtoken accesstoken "
    "refreshtoken bearer cookie cookies authorization".split()
)
# As the last word, after any other word: `WANDB_PASS`, `--hf-tok`, `HF_PAT`, `SLACK_TKN`.
SECRET_LAST_WORDS = frozenset("pass tok tkn pat".split())
# `key` and `token` are credentials after these words (`--api-key`, `hub_token`), and ambiguous
# after any other (`--csv-img-key`, `pad_token`).
KEY_QUALIFIERS = frozenset(
    "api access secret private account storage encryption decryption signing master client license "
    "service subscription auth ssh deploy app shared primary secondary admin consumer webhook hmac "
    "aes crypto session sas x".split()
)
TOKEN_QUALIFIERS = frozenset(
    "api access auth bearer refresh hf hub huggingface github gh gitlab slack bot wandb neptune comet "
    "session oauth personal private secret security csrf service user admin deploy registry npm "
    "pypi telegram discord login jwt sas app client write read".split()
)
# Names whose value may be a credential, judged by its shape: single letters used for passwords in
# some CLIs and for ports, patience or processes in others, and words used both ways.
AMBIGUOUS_NAMES = frozenset("p k t key pkey pat pass tok auth session".split())
AMBIGUOUS_WORDS = frozenset("auth session".split())
# A last word that says what the value is *about*: `--token-file`, `--password-env`, `--key-dim`.
DESCRIPTORS = frozenset(
    "file files path paths dir dirs folder name names id ids env var variable type kind len length size "
    "dim dims count num max min limit prob ratio rate weight weights budget mode format fmt index idx col "
    "column field prefix suffix url uri endpoint host hash strategy scheme policy method style location "
    "provider source helper cmd command required enabled position pos offset".split()
)
# A first word that makes the option a switch: `--use-auth-token`, `--no-password`, `--ask-pass`.
SWITCH_PREFIXES = frozenset(
    "use no ask prompt require enable disable with without skip allow show print".split()
)

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


def name_words(name: str) -> list[str]:
    """`--hf-tok` → [hf, tok]; `AccountKey` → [account, key]; `APIKey` → [api, key]."""
    spaced = _CAMEL.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", name))
    return [w for w in _WORD_SPLIT.split(spaced.lower()) if w]


def classify_name(name: str, extra: Iterable[str] = ()) -> NameVerdict:
    """Whether a name holds a credential (``secret``), may hold one (``ambiguous``), or not (``plain``).

    ``extra``: a project's own glob patterns (`secrets.patterns`), matched case-insensitively on the
    name without its dashes; a match is ``secret``.
    """
    bare = name.lstrip("-+~")
    upper = bare.upper()
    if any(fnmatch.fnmatchcase(upper, p.upper()) or fnmatch.fnmatchcase(upper.replace("-", "_"), p.upper())
           for p in extra):  # fmt: skip
        return "secret"
    words = name_words(bare)
    if not words:
        return "plain"
    if len(words) == 1 and words[0] in AMBIGUOUS_NAMES:
        return "ambiguous"
    last = words[-1]
    if last in DESCRIPTORS or (len(words) > 1 and words[0] in SWITCH_PREFIXES):
        return "plain"
    if any(w in SECRET_WORDS for w in words):
        return "secret"
    if len(words) > 1 and last in SECRET_LAST_WORDS:
        return "secret"
    if last in ("key", "token"):
        qualifiers = KEY_QUALIFIERS if last == "key" else TOKEN_QUALIFIERS
        if len(words) == 1 and last == "token":
            return "secret"  # `--token`
        return "secret" if words[-2] in qualifiers else "ambiguous"
    if any(w in AMBIGUOUS_WORDS for w in words):
        return "ambiguous"
    return "plain"


_SWITCH_VALUES = frozenset("true false yes no on off none null ~ ??? 0 1".split())


def hides_value(verdict: NameVerdict, value: object) -> bool:
    """Whether the value given under a name of this class is hidden whole.

    Switch values (`true`, `no`, `0`), nulls, Hydra's `???` and interpolations (`${oc.env:TOKEN}`:
    a reference, not the secret) are never hidden; a short number under a secret name is not either.
    """
    if value is None or isinstance(value, bool) or verdict == "plain":
        return False
    if isinstance(value, (dict, list, tuple)):
        return False  # judged item by item
    text = str(value).strip()
    if not text or text.lower() in _SWITCH_VALUES or text.startswith("${") or text == REDACTED:
        return False
    if verdict == "secret":
        return not (isinstance(value, (int, float)) and len(text) < MIN_SECRET)
    return isinstance(value, str) and (looks_random(text) or has_secret_shape(text))


_RANDOM_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~:]+")


def looks_random(text: str) -> bool:
    """A long string of mixed letters and digits that switches between them like a key does.

    `5d41402abc4b2a76b9719d911017c592`, a base64 key: yes. `bert-base-uncased-sst2`,
    `checkpoints/epoch_10.pt`, `run-20240101`: no (words, paths, dates change class rarely).
    """
    if len(text) < 16 or not _RANDOM_CHARS.fullmatch(text):
        return False
    classes = [("d" if c.isdigit() else "u" if c.isupper() else "l") for c in text if c.isalnum()]
    if len(classes) < 16 or "d" not in classes or not ({"u", "l"} & set(classes)):
        return False
    switches = sum(a != b for a, b in zip(classes, classes[1:], strict=False))
    return switches / len(classes) >= 0.2 and _entropy(text) >= 3.0


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for c in text:
        counts[c] = counts.get(c, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


# --------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Shape:
    """A credential recognised by its text. The group ``s`` (or ``t``) is what is masked; the rest is
    kept (`postgres://admin:***@db`, `hooks.slack.com/services/***`).

    ``needles``: lower-case strings one of which every match holds, at most ``back`` characters after
    the match's start; a match ends at most ``reach`` characters after its needle. In a large text
    (a log, a code file) the expression runs only around the needles, found by plain substring
    search: a 50 MB log without them costs a few fast scans, not a dozen regular-expression passes.
    """

    kind: str
    pattern: str
    needles: tuple[str, ...]
    back: int = 1
    reach: int = 4096
    flags: int = re.IGNORECASE

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern, self.flags)

    def compiled_bytes(self) -> re.Pattern[bytes]:
        return re.compile(self.pattern.encode(), self.flags)


_CS = 0  # case-sensitive: token formats are
_B = r"(?<![A-Za-z0-9_-])"  # not in the middle of a longer word
_E = r"(?![A-Za-z0-9_-])"
_PEM_BEGIN = r"-{4,5} ?BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_PEM_END = r"-{4,5} ?END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
# Line breaks (or `\n` escapes, in JSON), up to four `Name: value` headers, then base64.
_PEM_BODY = r"(?:\\[rn]|\s)+(?:[A-Za-z-]{2,40}: [^\r\n]{0,200}(?:\\[rn]|\s)+){0,4}[A-Za-z0-9+/=]{40}"
_KEY_SPAN = 65536
SHAPES = (
    # A key block with its body (not a parser's literal `"-----BEGIN RSA PRIVATE KEY-----"`): to its END
    # line, or, when cut short, to the end of its base64.
    Shape(
        "a private key",
        rf"(?P<s>{_PEM_BEGIN}{_PEM_BODY}(?:[\s\S]{{0,{_KEY_SPAN}}}?{_PEM_END}|[A-Za-z0-9+/=\s\\:,.-]{{0,{_KEY_SPAN}}}))",
        ("private key",), back=64, reach=_KEY_SPAN + 2048, flags=_CS,
    ),
    Shape(
        "a PuTTY key",
        r"(?P<s>PuTTY-User-Key-File-\d+: ?[\w-]+\r?\nEncryption:[^\n]{0,200}"
        r"(?:\r?\n(?:[A-Za-z-]{2,40}:[^\n]{0,2048}|[A-Za-z0-9+/=]{4,128})){0,256})",
        ("putty-user-key-file-",), reach=_KEY_SPAN, flags=_CS,
    ),
    Shape("a JWT", _B + r"(?P<s>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)", ("eyj",),
          reach=16384, flags=_CS),
    Shape(
        "an API token",
        _B + r"(?P<s>sk-(?:proj-|ant-(?:api\d\d-|admin\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"  # OpenAI
        r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
        r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
        r"|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"  # Slack
        r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
        r"|(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"  # AWS access key ids
        r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
        r"|npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}"  # npm, PyPI
        r"|[sr]k_(?:live|test)_[0-9A-Za-z]{20,}"  # Stripe
        r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
        r"|r8_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{40,}|dapi[0-9a-f]{32})" + _E,  # Replicate, Groq, Databricks
        ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "xapp-", "hf_",
         "akia", "asia", "abia", "acca", "aiza", "npm_", "pypi-", "k_live_", "k_test_", "sg.", "r8_", "gsk_",
         "dapi"),
        flags=_CS,
    ),
    Shape(
        "a service token",
        _B + r"(?P<s>hv[sb]\.[A-Za-z0-9_-]{24,}"  # HashiCorp Vault
        r"|do[opr]_v1_[a-f0-9]{64}"  # DigitalOcean
        r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"  # Shopify
        r"|ATATT3[A-Za-z0-9_=-]{20,}"  # Atlassian
        r"|lin_api_[A-Za-z0-9]{40}"  # Linear
        r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"  # Postman
        r"|glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"  # Grafana
        r"|tskey-(?:auth|api|client)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}"  # Tailscale
        r"|pul-[a-f0-9]{40}"  # Pulumi
        r"|sntry[su]_[A-Za-z0-9+/=_]{40,}"  # Sentry auth tokens
        r"|dp\.(?:st|sa|ct|pt|scim|audit)\.[A-Za-z0-9_.-]{40,}"  # Doppler
        r"|pplx-[A-Za-z0-9]{40,}"  # Perplexity
        r"|GOCSPX-[A-Za-z0-9_-]{28}"  # Google OAuth client secrets
        r"|ya29\.[0-9A-Za-z_-]{20,}"  # Google OAuth access tokens
        r"|[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})" + _E,  # Azure AD (Entra) client secrets
        ("hvs.", "hvb.", "_v1_", "shp", "atatt3", "lin_api_", "pmak-", "glc_", "glsa_", "tskey-", "pul-",
         "sntry", "dp.", "pplx-", "gocspx-", "ya29.", "q~"),
        back=8, flags=_CS,
    ),
    Shape("a Telegram bot token", _B + r"\d{8,10}:(?P<s>AA[A-Za-z0-9_-]{33})" + _E, (":aa",), back=12,
          flags=_CS),
    Shape(
        "a webhook URL",
        r"(?:hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/"
        r"|\.webhook\.office\.com/webhookb?2?/|outlook\.office(?:365)?\.com/webhook/)(?P<s>[^\s\"'<>)\]}]{8,2048})",
        ("hooks.slack.com", "discord", "webhook"), back=32,
    ),
    Shape(
        "a URL signature", r"[?&](?:sig|signature|X-Amz-Signature)=(?P<s>[A-Za-z0-9%/+=_-]{16,2048})",
        ("sig",), back=8,
    ),
    # `scheme://user:password@host` (DSNs, proxies, git remotes): the password; matched from the literal
    # `://` with bounded repeats, so a long line costs linear time.
    Shape("a URL password", r"://[^/@\s:\"']{0,256}:(?P<s>[^/@\s\"']{1,256})@", ("://",), back=0, reach=600),
    # `https://<token>@host` (a Sentry DSN's key, a token in a git remote): a long user alone.
    Shape("a URL token", r"://(?P<s>[A-Za-z0-9_.~%+-]{16,256})@", ("://",), back=0, reach=600),
    # `;`-separated connection strings (Azure storage and Service Bus, ADO.NET, ODBC).
    Shape(
        "a connection-string key",
        r"(?<![A-Za-z0-9])(?:AccountKey|SharedAccessKey|SharedAccessSignature|SharedSecretValue)"
        r"\s*=\s*(?P<s>[^;\"'\s]{4,2048})",
        ("accountkey", "sharedaccess", "sharedsecret"),
    ),
    Shape(
        "a connection-string password",
        r"(?:(?<=;)\s{0,8}(?:Password|Pwd)\s*=\s*(?P<s>[^;\"'\s]{1,1024})"
        r"|(?<![A-Za-z0-9_.])(?:Password|Pwd)\s*=\s*(?P<t>[^;\"'\s]{1,1024})(?=\s*;))",
        ("password", "pwd"), back=10,
    ),
    Shape(
        "an authorization header",
        r"authorization[\"']?\s{0,4}[:=]\s{0,4}[\"']?(?:basic|bearer|token|digest)\s{1,4}"
        r"(?P<s>[A-Za-z0-9._~+/=-]{8,2048})|(?<![A-Za-z])bearer\s{1,4}(?P<t>[A-Za-z0-9._~+/-]{20,2048}=*)",
        ("authorization", "bearer"),
    ),
)  # fmt: skip

# `api_key: x`, `'password': 'x'`, `access_token=x` in printed text (logs, tracebacks): the value. Not
# applied to code, where `password=args.password` is code and not a secret.
# (needles: `_key` stands for `api_key`, `access-key`…, `_token` for `auth_token`, `hf_token`…)
_ASSIGNED = ("pass", "pwd", "secret", "apikey", "_key", "-key", "accesskey", "privatekey", "accountkey",
             "_token", "-token", "credential")  # fmt: skip
ASSIGNMENT = Shape(
    "an assigned credential",
    r"(?:password|passwd|passphrase|pwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key"
    r"|account[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|hf[_-]?token|hub[_-]?token"
    r"|credentials?)[\"']?\s{0,4}[:=]\s{0,4}[\"']?(?P<s>(?!\*\*\*)(?!\$\{)[^\s\"',;)}\]]{4,512})",
    _ASSIGNED,
    back=0,
    reach=600,
)


@functools.cache
def _text_shapes(assignments: bool) -> list[tuple[Shape, re.Pattern[str]]]:
    """The shapes compiled for text (with `ASSIGNMENT` last when asked), once, when first used: a
    command that never masks (`repro export`) does not pay for compiling them."""
    return [(s, s.compiled()) for s in (*SHAPES, *([ASSIGNMENT] if assignments else []))]


@functools.cache
def _byte_shapes(assignments: bool) -> list[tuple[Shape, re.Pattern[bytes]]]:
    """`_text_shapes` for bytes."""
    return [(s, s.compiled_bytes()) for s in (*SHAPES, *([ASSIGNMENT] if assignments else []))]


_WINDOWED = 1 << 16  # texts larger than this are masked around their needles only


def _secret_group(m: re.Match[str] | re.Match[bytes]) -> str:
    return "s" if m.start("s") >= 0 else "t"


def _masked(m: re.Match[str]) -> str:
    g = _secret_group(m)
    whole, start = m.group(0), m.start()
    return whole[: m.start(g) - start] + REDACTED + whole[m.end(g) - start :]


def _masked_bytes(m: re.Match[bytes]) -> bytes:
    g = _secret_group(m)
    whole, start = m.group(0), m.start()
    return whole[: m.start(g) - start] + REDACTED.encode() + whole[m.end(g) - start :]


def mask_shapes(text: str, assignments: bool = False) -> tuple[str, list[str]]:
    """The text with every credential-shaped part replaced by ``***``, and the kinds found.

    ``assignments``: also `api_key: x` and the like (printed text, not code).
    """
    low = text.lower()
    kinds: list[str] = []
    shapes = _text_shapes(assignments)
    for shape, pattern in shapes:
        if any(n in low for n in shape.needles):
            text, n = pattern.subn(_masked, text)
            if n and shape.kind not in kinds:
                kinds.append(shape.kind)
    return text, kinds


def mask_shapes_bytes(data: bytes, assignments: bool = False) -> bytes:
    """`mask_shapes` over bytes (logs and files in any encoding).

    Each needle is counted once (a fast substring scan); a shape whose needles are absent costs
    nothing more, one whose needles are rare runs only around them, one whose needles are
    everywhere (`://` on every line) runs over the whole text.
    """
    low = data.lower()
    counts: dict[bytes, int] = {}
    shapes = _byte_shapes(assignments)
    for shape, pattern in shapes:
        needles = [n.encode() for n in shape.needles]
        for n in needles:
            if n not in counts:
                counts[n] = low.count(n)
        hits = sum(counts[n] for n in needles)
        if not hits:
            continue
        if len(data) <= _WINDOWED or hits * (shape.back + shape.reach) >= len(data):
            masked = pattern.sub(_masked_bytes, data)
        else:
            masked = _sub_windows(data, pattern, _windows(low, needles, shape.back, shape.reach))
        if masked != data:
            data, low, counts = masked, masked.lower(), {}
    return data


def _windows(low: bytes, needles: list[bytes], back: int, reach: int) -> list[tuple[int, int]]:
    """Merged spans around every needle: from ``back`` (plus one, for a look-behind) before it to
    ``reach`` after it."""
    spans: list[tuple[int, int]] = []
    for needle in needles:
        i = low.find(needle)
        while i != -1:
            spans.append((max(0, i - back - 1), min(len(low), i + reach)))
            i = low.find(needle, i + 1)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _sub_windows(data: bytes, pattern: re.Pattern[bytes], windows: list[tuple[int, int]]) -> bytes:
    parts: list[bytes] = []
    done = 0
    for start, end in windows:
        parts += [data[done:start], pattern.sub(_masked_bytes, data[start:end])]
        done = end
    parts.append(data[done:])
    return b"".join(parts)


def secret_parts(text: str, assignments: bool = False) -> set[str]:
    """The credential-shaped parts of a text (a URL's password, a token inside a sentence);
    ``assignments``: also the values of `api_key: x` and the like (printed text)."""
    low = text.lower()
    found: set[str] = set()
    for shape, pattern in _text_shapes(assignments):
        if any(n in low for n in shape.needles):
            for m in pattern.finditer(text):
                found.add(m.group(_secret_group(m)))
    return {f for f in found if f and f != REDACTED}


def shape_in_bytes(data: bytes) -> str | None:
    """The kind of the first credential shape the bytes hold (`an API token`), or None: the
    shapes alone, not `api_key: x` assignments (outputs are judged this way: a tokenizer's
    `pad_token` is not a credential, an `hf_…` anywhere is)."""
    low = data.lower()
    for shape, pattern in _byte_shapes(False):
        if any(n.encode() in low for n in shape.needles) and pattern.search(data) is not None:
            return shape.kind
    return armour_in(data)


def has_secret_shape(text: str) -> bool:
    return bool(secret_parts(text))


_URL_USERINFO = re.compile(r"://[^/@\s]{1,512}@")


def strip_url_credentials(url: str) -> str:
    """`https://user:pw@host/x` → `https://host/x`: for a URL kept as an identity (a git remote),
    where a masked `***` would only be noise."""
    return _URL_USERINFO.sub("://", url)


# --------------------------------------------------------------------------- files

# A project's environment secrets: `.env`, `.env.local`, `secret.env` (never shown to a replay either).
ENV_FILE_PATTERNS = (".env", ".env.*", "*.env")
_ENV_FILE_RE = "|".join(fnmatch.translate(p) for p in ENV_FILE_PATTERNS)


@functools.cache
def _re(pattern: Any) -> re.Pattern[Any]:
    """``pattern`` compiled on first use: a command that judges no file (`repro export`) compiles none
    of the file, armour and location rules."""
    return re.compile(pattern)


def is_env_file(name: str) -> bool:
    """Whether a file or folder name (one path part) is an environment file (`ENV_FILE_PATTERNS`)."""
    return _re(_ENV_FILE_RE).match(name.lower()) is not None


# Files that never enter a code snapshot, by name.
SECRET_FILE_PATTERNS = (
    *ENV_FILE_PATTERNS, ".envrc", ".netrc", "_netrc", ".pypirc", ".npmrc", ".git-credentials",
    ".pgpass", ".my.cnf", ".dockercfg", "*.pem", "*.key", "*.p12", "*.pfx", "*.ppk", "*.jks", "*.keystore",
    "*.gpg", "*.asc", "*.kdbx", "*.tfvars", "id_rsa*", "id_dsa*", "id_ed25519*", "id_ecdsa*",
    "credentials", "credentials.*", "*secret*", "service-account*.json", "*-sa.json",
)  # fmt: skip


_SECRET_FILE_RE = "|".join(fnmatch.translate(p) for p in SECRET_FILE_PATTERNS)  # one match per name


def is_secret_file(relpath: str) -> bool:
    """Whether a file looks like it holds credentials by its name alone."""
    return is_secret_name(relpath.rsplit("/", 1)[-1])


def is_secret_name(name: str) -> bool:
    """`is_secret_file` of a name with no directory part."""
    return _re(_SECRET_FILE_RE).match(name.lower()) is not None


# A file holding a credential whatever its name: a key block with a body (not a parser's literal
# `"-----BEGIN RSA PRIVATE KEY-----"`), a PuTTY key, cloud credential files.
ARMOUR = (  # the most specific first: it names what was found
    ("a cloud service-account file", rb'"type"\s*:\s*"(?:service_account|authorized_user|external_account)"'),
    ("a cloud service-account file", rb'"private_key"\s*:\s*"-----BEGIN'),
    ("a private key", (_PEM_BEGIN + _PEM_BODY).encode()),
    ("a PuTTY key", rb"PuTTY-User-Key-File-\d+: ?[\w-]+\s+Encryption: "),
    # at the start of a line with a key's characters to its end: `aws_secret_access_key=os.environ[…]`
    # in a script reads the key, it does not hold one
    ("an AWS credentials file",
     rb"(?m)^[ \t]*aws_secret_access_key[ \t]*=[ \t]*[A-Za-z0-9/+=]{30,}[ \t]*\r?$"),
    ("an OAuth client secret", rb'"client_secret"\s*:\s*"[^"]{8,}'),
)  # fmt: skip
_ARMOUR_NEEDLES = (b"PRIVATE KEY", b"PuTTY-User-Key-File-", b'"type"', b'"private_key"',
                   b"aws_secret_access_key", b'"client_secret"')  # fmt: skip
ARMOUR_SPAN = 4096  # the longest text an armour pattern needs: chunks overlap by this much


def armour_in(chunk: bytes) -> str | None:
    """What credential the bytes hold (`a private key`), or None."""
    if not any(n in chunk for n in _ARMOUR_NEEDLES):
        return None
    for kind, pattern in ARMOUR:
        if _re(pattern).search(chunk):
            return kind
    return None


# --------------------------------------------------------------------------- code

# A string literal given to a name in code: `SECRET_KEY = '…'`, `wandb.login(key="…")`,
# `"api_key": "…"`, `os.environ["HF_TOKEN"] = "…"`, `password: str = "…"`. The name decides
# (`classify_name`, then `hides_value`): `os.environ["AWS_SECRET_ACCESS_KEY"]` gives no literal to a
# name, and `key = "AWS_SECRET_ACCESS_KEY"` names a variable, it does not look like a key.
CODE_LITERAL = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]{0,128})(?:[\"']\])?[\"']?[ \t]{0,8}"
    r"(?::[ \t]{0,8}[\w.\[\], ]{1,40}[ \t]{0,8})?(?<![=!<>])[:=][ \t]{0,8}[rRbBuU]?(?P<q>[\"'])"
    r"(?P<value>[^\"'\\\r\n]{4,512})(?P=q)"
)


# --------------------------------------------------------------------------- credential locations

# Where ML tools and the shell keep logins, listed once: (place, its login files). A place is one path
# part or two in a row (`.aws`, `.config/gcloud`): a host path holding it is never shown to a replay
# (`repro.facts.hostpaths`). A login file is (path glob, content pattern or None for any content, what
# it is): a file whose path ends so and whose content matches is a credential whatever its suffix (a
# W&B `settings` file without `api_key` is only a project setting; a `kaggle.json` without `key` is
# not Kaggle's). A new tool is one entry here, and both rules know it.
LoginFile = tuple[str, bytes | None, str]
_GCLOUD, _AZURE = "a Google Cloud credential file", "an Azure credential cache"
_HF = "a Hugging Face token file"
CREDENTIAL_PLACES: tuple[tuple[str, tuple[LoginFile, ...]], ...] = (
    ("wandb/settings", (
        ("*wandb/settings", rb"(?m)^[ \t]*api_key[ \t]*=[ \t]*\S", "a W&B settings file with an API key"),
    )),
    (".wandb", ()),
    (".config/wandb", ()),
    (".cache/huggingface", (("*huggingface/token", None, _HF), ("*huggingface/stored_tokens", None, _HF))),
    (".huggingface", ()),
    (".kaggle", (("*kaggle.json", rb'"key"\s*:\s*"[^"]{8,}', "a Kaggle API key file"),)),
    (".aws", (("*.aws/config", rb"(?m)^[ \t]*aws_(?:secret_access_key|session_token)[ \t]*=",
               "an AWS config with keys"),)),
    (".config/gcloud", (
        ("*gcloud/application_default_credentials.json", None, _GCLOUD),
        ("*gcloud/credentials.db", None, _GCLOUD),
        ("*gcloud/access_tokens.db", None, _GCLOUD),
        ("*gcloud/legacy_credentials/*", None, _GCLOUD),
    )),
    (".azure", (
        ("*.azure/accessTokens.json", None, _AZURE),
        ("*.azure/msal_token_cache.*", None, _AZURE),
        ("*.azure/service_principal_entries.*", None, _AZURE),
    )),
    (".docker", (("*.docker/config.json", rb'"(?:auth|identitytoken|registrytoken)"\s*:\s*"[^"]{4,}',
                  "a Docker registry login"),)),
    (".config/gh", (("*gh/hosts.yml", rb"oauth_token\s*:", "a GitHub CLI login"),)),
    (".kube", (("*.kube/config", rb"(?:token|client-key-data|password)\s*:", "a Kubernetes login"),)),
    (".databrickscfg", (
        ("*.databrickscfg", rb"(?m)^[ \t]*(?:token|password)[ \t]*=", "a Databricks login"),
    )),
    (".ssh", ()), (".gnupg", ()), (".netrc", ()), ("_netrc", ()), (".git-credentials", ()), (".pypirc", ()),
    (".npmrc", ()), (".pgpass", ()), (".terraform.d", ()), (".vault-token", ()), (".boto", ()),
    (".s3cfg", ()), (".mlflow", ()), (".comet.config", ()), (".neptune", ()),
)  # fmt: skip
# The login files of every place, as `credential_location` matches them.
CREDENTIAL_LOCATIONS = tuple(login for _, logins in CREDENTIAL_PLACES for login in logins)
_LOCATIONS = [(fnmatch.translate(g.lower()), c, k) for g, c, k in CREDENTIAL_LOCATIONS]  # fmt: skip
_ANY_LOCATION = "|".join(glob for glob, _, _ in _LOCATIONS)
LOCATION_HEAD = 1 << 16  # how much of such a file is read to judge it


def credential_location(relpath: str) -> list[tuple[re.Pattern[bytes] | None, str]]:
    """The credential locations a path stands in (its content is judged by the caller): empty for
    most paths."""
    low = "/" + relpath.lower()
    if _re(_ANY_LOCATION).match(low) is None:
        return []  # most paths: one search instead of one per location
    return [(None if c is None else _re(c), kind) for glob, c, kind in _LOCATIONS if _re(glob).match(low)]


def location_holds(relpath: str, head: bytes) -> str | None:
    """What credential a file at ``relpath`` whose first bytes are ``head`` is (`a Kaggle API key
    file`), or None."""
    for content, kind in credential_location(relpath):
        if head.strip() and (content is None or content.search(head)):
            return kind
    return None
