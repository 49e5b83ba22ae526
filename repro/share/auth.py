"""The host's registry logins: what `docker login` and `podman login` wrote, never a capsule's.

Read in this order, the first that has the registry winning: ``$REGISTRY_AUTH_FILE``, the podman
login file (``$XDG_RUNTIME_DIR/containers/auth.json``, ``~/.config/containers/auth.json``), then
Docker's (``$DOCKER_CONFIG/config.json``, ``~/.docker/config.json``). In each, a credential helper
named for the registry (``credHelpers``) is asked first, then the login stored inline (``auths``),
then the file's default helper (``credsStore``), as Docker does.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELPER_TIMEOUT_S = 30  # a credential helper that waits for a desktop keyring longer is not answering


@dataclass(frozen=True)
class Login:
    """A user name and secret for one registry, and the file it came from (named, never shown)."""

    username: str
    secret: str
    source: str


def login_files() -> list[Path]:
    """The login files this host's container tools write, in the order they are read."""
    env = os.environ
    files = [Path(env["REGISTRY_AUTH_FILE"])] if env.get("REGISTRY_AUTH_FILE") else []
    if env.get("XDG_RUNTIME_DIR"):
        files.append(Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    home = Path.home()
    files.append(Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "containers" / "auth.json")
    files.append(Path(env.get("DOCKER_CONFIG") or home / ".docker") / "config.json")
    return files


def find_login(registry: str) -> Login | None:
    """The login the host keeps for ``registry`` (host[:port]), or None when it has none."""
    for path in login_files():
        config = _read(path)
        if config is None:
            continue
        found = _from_config(config, registry, path)
        if found is not None:
            return found
    return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent or unreadable: the next file is asked, as the container tools do
    return data if isinstance(data, dict) else None


def _keys(registry: str) -> tuple[str, ...]:
    return (registry, f"https://{registry}", f"http://{registry}", f"https://{registry}/v1/")


def _from_config(config: dict[str, Any], registry: str, path: Path) -> Login | None:
    helpers = _section(config, "credHelpers")
    for key in _keys(registry):
        if isinstance(helpers.get(key), str):
            return _from_helper(helpers[key], registry)
    auths = _section(config, "auths")
    for key in _keys(registry):
        entry = auths.get(key)
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            try:
                user, _, secret = base64.b64decode(entry["auth"]).decode().partition(":")
            except ValueError:
                continue
            return Login(user, secret, str(path))
    store = config.get("credsStore")
    return _from_helper(store, registry) if isinstance(store, str) and store else None


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    found = config.get(name)
    return found if isinstance(found, dict) else {}


def _from_helper(name: str, registry: str) -> Login | None:
    """Ask ``docker-credential-NAME get`` (the credential-helper protocol); None when it has nothing."""
    program = f"docker-credential-{name}"
    try:
        done = subprocess.run(
            [program, "get"], input=registry, capture_output=True, text=True, timeout=HELPER_TIMEOUT_S
        )
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    if not isinstance(answer, dict) or not answer.get("Secret"):
        return None
    return Login(str(answer.get("Username") or ""), str(answer["Secret"]), program)
