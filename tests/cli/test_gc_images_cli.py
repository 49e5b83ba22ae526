"""`repro gc --images` without an engine: it decides from this store's image ledger, and asks the
engine only when the ledger names an image to remove.

Against a real engine: tests/integration/test_hostile_images.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.store import images as store_images
from repro.store.runs import Store

UNUSED = "sha256:" + "7" * 64


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def test_a_store_that_made_no_image_needs_no_engine(cli, tmp_path: Path, no_engine: None) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    Store(tmp_path).ensure()
    store_images.note(Store(tmp_path).dir, store_images.ImageUse("sha256:" + "8" * 64, None, made=False))
    r = cli("gc", "--images", cwd=tmp_path)
    assert r.code == 0, r.err
    assert "no unused images of this store" in r.err and r.out == ""


def test_an_unused_image_and_no_engine_is_one_line_exit_3_and_forgets_nothing(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, no_engine: None
) -> None:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    store = Store(tmp_path)
    store.ensure()
    store_images.note(store.dir, store_images.ImageUse(UNUSED, "20260101-000000-aaaa", made=True))
    r = cli("gc", "--images", "--dry-run", cwd=tmp_path)
    assert r.code == 3, r.out + r.err
    assert "no Docker engine answers" in r.err and "Traceback" not in r.err
    assert [use.id for use in store_images.uses(store.dir)] == [UNUSED]


def test_an_image_archive_for_slurm_nodes_that_no_run_uses_is_removed(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, no_engine: None
) -> None:
    from repro.backends.slurm.images import NODE_IMAGES

    (tmp_path / "repro.yaml").write_text("backend: local\n")
    store = Store(tmp_path)
    store.ensure()
    used = "sha256:" + "9" * 64
    store_images.note(store.dir, store_images.ImageUse(used, "20260101-000000-bbbb", made=False))
    folder = store.dir / NODE_IMAGES
    folder.mkdir()
    (folder / f"{UNUSED[7:]}.tar").write_bytes(b"x" * 100)
    (folder / f"{used[7:]}.tar").write_bytes(b"y")
    (store.dir / "runs" / "20260101-000000-bbbb").mkdir(parents=True)  # a run in progress uses it
    r = cli("gc", "--images", "--dry-run", cwd=tmp_path)
    assert r.code == 0, r.err
    assert f"would remove image archive {UNUSED[7:]}.tar" in r.out and used[7:] not in r.out
    assert (folder / f"{UNUSED[7:]}.tar").exists()
    r = cli("gc", "--images", cwd=tmp_path)
    assert r.code == 0 and f"removed image archive {UNUSED[7:]}.tar" in r.out, r.out + r.err
    assert not (folder / f"{UNUSED[7:]}.tar").exists()
