"""Rootless Podman's API service, where it cannot start: one line and a hint, exit 3 (BackendUnavailable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.backends import registry
from repro.backends.base import Event
from repro.backends.podman import service
from repro.errors import BackendUnavailable


def test_no_podman_command_is_unavailable_with_the_setup_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "PODMAN", "podman-absent-9f3c")
    with pytest.raises(BackendUnavailable) as caught:
        service.Service().start()
    assert "no `podman` command here" in str(caught.value) and "podman-up.sh" in (caught.value.hint or "")
    assert not service.usable() and not service.has_image("repro-base:bookworm")


def test_user_namespaces_disabled_names_the_sysctl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    off, on = tmp_path / "unprivileged_userns_clone", tmp_path / "max_user_namespaces"
    off.write_text("0\n")
    on.write_text("15000\n")
    monkeypatch.setattr(service, "_SYSCTLS", ((str(on), "user.max_user_namespaces"),
                                              (str(off), "kernel.unprivileged_userns_clone")))  # fmt: skip
    monkeypatch.setattr("repro.backends.podman.service.os.getuid", lambda: 1000)
    monkeypatch.setattr("repro.backends.podman.service.shutil.which", lambda name: f"/usr/bin/{name}")
    assert service.userns_disabled() == "kernel.unprivileged_userns_clone"
    with pytest.raises(BackendUnavailable) as caught:
        service.Service().start()
    assert "kernel.unprivileged_userns_clone is 0" in str(caught.value)
    assert "sysctl -w kernel.unprivileged_userns_clone=1" in (caught.value.hint or "")
    assert not service.usable()
    off.write_text("1\n")
    assert service.userns_disabled() is None


def test_podman_is_a_sandbox_after_docker() -> None:
    assert registry.sandbox() == "docker" and registry.is_sandbox("podman")
    assert not registry.is_sandbox("local")
    assert not registry.get("podman").on_host and registry.locks_first("podman")


@pytest.mark.parametrize(
    ("docker", "docker_base", "podman", "podman_base", "chosen", "line"),
    [
        (True, True, True, True, "docker", None),
        (False, False, True, True, "podman", "backend auto → podman: no Docker engine answers"),
        (True, False, True, True, "podman", "backend auto → podman: the Docker engine has no base image b:1"),
        (False, False, True, False, "local", "Podman's storage has no base image b:1"),
        (False, False, False, False, "local", "set DOCKER_HOST); no rootless Podman here"),
    ],
)
def test_auto_tries_docker_then_rootless_podman_then_says_why_local(
    monkeypatch: pytest.MonkeyPatch, docker: bool, docker_base: bool, podman: bool, podman_base: bool,
    chosen: str, line: str | None,
) -> None:  # fmt: skip
    from repro.backends.docker import engine

    monkeypatch.setattr(engine, "engine_available", lambda: docker)
    monkeypatch.setattr(engine, "has_image", lambda ref: docker_base)
    monkeypatch.setattr(service, "usable", lambda: podman)
    monkeypatch.setattr(service, "has_image", lambda ref: podman_base)
    events: list[Event] = []
    assert registry.auto(events.append, need_lock=True, base_image="b:1") == chosen
    if line is None:
        assert events == []  # docker, as before: nothing to tell
    else:
        assert len(events) == 1 and line in events[0].text
