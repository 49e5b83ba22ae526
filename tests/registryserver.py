"""A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution server) on
127.0.0.1 at a free port, with htpasswd basic auth and TLS from a CA made here; each fixture starts
and stops its own (`scripts/registry-up.sh` installs the packages)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

USER, PASSWORD = "trainer", "correct-horse-42"
_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")  # ", tls" follows when it speaks TLS


def missing() -> str | None:
    """Why no registry can be started here, or None."""
    for tool in ("docker-registry", "htpasswd", "skopeo"):
        if shutil.which(tool) is None:
            return f"no {tool} here (`bash scripts/registry-up.sh` installs Debian's docker-registry, skopeo)"
    return None


@dataclass
class Registry:
    host: str  # 127.0.0.1:PORT
    root: Path  # its storage directory
    ca: Path  # the CA its certificate is signed by
    auth_file: Path  # a login file for it, as `podman login` writes one

    def env(self, auth_file: Path | None = None) -> dict[str, str]:
        """The environment a client of this registry runs with: the test CA trusted, the login file."""
        return {"SSL_CERT_FILE": str(self.ca), "REGISTRY_AUTH_FILE": str(auth_file or self.auth_file),
                "DOCKER_CONFIG": str(self.root.parent / "no-docker-config")}  # fmt: skip

    def blobs(self) -> dict[str, int]:
        """The blobs the registry keeps on its disk (manifests among them): digest → bytes."""
        found = (self.root / "docker" / "registry" / "v2" / "blobs").glob("sha256/*/*/data")
        return {f"sha256:{p.parent.name}": p.stat().st_size for p in found}

    def stored_bytes(self) -> int:
        """Bytes of the blobs the registry keeps on its disk."""
        return sum(self.blobs().values())

    def blob_file(self, digest: str) -> Path:
        hexa = digest.removeprefix("sha256:")
        return self.root / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexa[:2] / hexa / "data"


def login_file(path: Path, host: str, user: str, password: str) -> Path:
    import base64

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": token}}}))
    return path


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "repro test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = where / "ca.pem", where / "server.pem", where / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
    )  # fmt: skip
    return paths


@contextmanager
def running(where: Path, tls: bool = True) -> Iterator[Registry]:
    """A registry serving from ``where`` until the block ends (with ``tls=False``, plain HTTP)."""
    where.mkdir(parents=True, exist_ok=True)
    ca, cert, key = _certificates(where)
    htpasswd = subprocess.run(
        ["htpasswd", "-Bbn", "-C", "4", USER, PASSWORD], capture_output=True, text=True, check=True
    )
    (where / "htpasswd").write_text(htpasswd.stdout)
    root = where / "storage"
    config = {
        "version": 0.1,
        "log": {"level": "info"},
        "storage": {"filesystem": {"rootdirectory": str(root)}},
        "http": {
            "addr": "127.0.0.1:0",
            **({"tls": {"certificate": str(cert), "key": str(key)}} if tls else {}),
        },
        "auth": {"htpasswd": {"realm": "repro-test", "path": str(where / "htpasswd")}},
    }
    (where / "config.yml").write_text(json.dumps(config))  # JSON is YAML
    log = where / "registry.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["docker-registry", "serve", str(where / "config.yml")], stdout=out, stderr=out
        )
    try:
        port = _port(proc, log)
        host = f"127.0.0.1:{port}"
        yield Registry(host, root, ca, login_file(where / "auth.json", host, USER, PASSWORD))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _port(proc: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the registry did not start: {log.read_text(errors='replace')[-2000:]}")
