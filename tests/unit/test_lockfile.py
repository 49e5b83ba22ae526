"""The one lockfile module: pins, names, versions, mismatches; and how each lock variant resolves."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from repro.errors import BuildError, UsageError
from repro.facts import lockfile, lockplan, lockvariants, pipcompile


def _unasked(index: str) -> None:
    """The index probe of a lock that is reused or compiled by a stand-in: never asked."""
    raise AssertionError(f"{index} asked, though nothing is compiled")


H1, H2 = "1" * 64, "2" * 64


def test_parse_lockfile_reads_markers_extras_and_continuations() -> None:
    text = (
        "# repro-lock-inputs: abc\n--index-url https://example.invalid/simple\n"
        f"Typing_Extensions==4.16.0 \\\n    --hash=sha256:{H1} \\\n    --hash=sha256:{H2}\n"
        "    # via torch\n"
        f'uvicorn[standard]==0.30.0 ; python_version >= "3.10" \\\n    --hash=sha256:{H1}\n'
    )
    pinned = lockfile.parse_lockfile(text)
    assert [(p.key, p.version) for p in pinned] == [("typing-extensions", "4.16.0"), ("uvicorn", "0.30.0")]
    assert pinned[0].hashes == [H1, H2]
    assert pinned[1].marker == 'python_version >= "3.10"'
    with pytest.raises(BuildError, match="not pinned"):
        lockfile.parse_lockfile(f"torch>=2 --hash=sha256:{H1}\n")
    with pytest.raises(BuildError, match="no --hash"):
        lockfile.parse_lockfile("torch==2.13.0\n")


def test_pins_are_lenient_and_names_normalised() -> None:
    lines = ["Foo.Bar==1.0", "torch>=2.6", "-c held.txt", "numpy===2.4.6", "# x==1", "garbage ==="]
    assert lockfile.pins(lines) == {"foo-bar": "1.0", "numpy": "2.4.6"}
    assert lockfile.canonical_name("Typing_Extensions") == "typing-extensions"
    assert lockfile.top_level_names("torch>=2.6\nNumPy\n-r other.txt\n") == ["numpy", "torch"]
    assert lockfile.compare_versions("2.13.0", "2.15.0") == -1
    assert lockfile.compare_versions("1.10", "1.9") == 1
    assert lockfile.compare_versions("abc", "abc") == 0


def test_mismatches_name_each_locked_package_that_ran_otherwise() -> None:
    locked = ["torch==2.15.0", "nvidia-cublas-cu12==12.8.4.1", "numpy==2.4.6"]
    ran = ["torch==2.13.0+cpu", "numpy==2.4.6", "pip==25.0"]
    found = lockfile.mismatches(locked, ran)
    assert [m.describe() for m in found] == [
        "nvidia-cublas-cu12: locked 12.8.4.1, ran absent",
        "torch: locked 2.15.0, ran 2.13.0+cpu",
    ]
    assert lockfile.mismatches(["a==1"], ["A==1"]) == []
    assert lockfile.freeze_diff(["a==1", "b==1"], ["a==2"]) == ["a: 1 → 2", "b: 1 → absent"]


def test_the_local_lock_holds_what_is_installed_where_the_source_allows_it() -> None:
    installed = {"torch": "2.13.0+cpu", "numpy": "2.4.6", "six": "1.0"}
    how = lockvariants.resolution("local", "torch>=2.6\nnumpy<2\nrequests\n", installed)
    assert how.constraints == ("torch==2.13.0+cpu",)  # numpy 2.4.6 breaks <2; requests absent
    assert how.index_url is None and how.platform is None and how.unresolvable_here() is None
    assert how.python == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_local_lock_reads_the_versions_this_interpreter_imports_by_any_spelling() -> None:
    from importlib import metadata

    how = lockvariants.resolution("local", "PyYAML\nclick>=1\nno-such-distribution-here\n")
    assert how.constraints == (f"click=={metadata.version('click')}", f"pyyaml=={metadata.version('PyYAML')}")


def test_the_cuda_lock_resolves_for_the_image_with_the_torch_cuda_index() -> None:
    how = lockvariants.resolution("cuda", "torch>=2.6\nnumpy\n", {"torch": "2.13.0+cpu"})
    assert how.constraints == ()  # the host's CPU torch is not what runs on the GPU
    assert how.index_url == lockvariants.CUDA_INDEX
    assert (how.platform, how.python) == (lockvariants.IMAGE_PLATFORM, lockvariants.IMAGE_PYTHON)
    other = lockvariants.Resolution("cuda", "3.12", lockvariants.IMAGE_PLATFORM, lockvariants.CUDA_INDEX)
    assert "Python 3.12" in (other.unresolvable_here() or "")  # pip-compile resolves for its own Python
    with pytest.raises(BuildError, match="cannot compile here"):
        pipcompile.compile_lock("torch\n", other, Path("/nonexistent/lock.txt"), None, reachable=_unasked)
    assert lockvariants.resolution("cuda", "numpy\n").index_url is None  # no torch: no torch index
    assert str(
        lockvariants.resolution("cuda", "torch\n", cuda_index="https://mirror.invalid/cu126").index_url
    ).endswith("cu126")
    with pytest.raises(UsageError):
        lockvariants.resolution("rocm", "torch\n")


def test_each_variant_has_its_own_inputs_and_file() -> None:
    text = "torch>=2.6\n"
    local = lockvariants.inputs_hash(text, lockvariants.resolution("local", text, {"torch": "2.13.0"}))
    assert local != lockvariants.inputs_hash(
        text, lockvariants.resolution("local", text, {"torch": "2.14.0"})
    )
    cpu = lockvariants.inputs_hash(text, lockvariants.resolution("cpu", text, {"torch": "2.13.0"}))
    assert cpu == lockvariants.inputs_hash(text, lockvariants.resolution("cpu", text, {"torch": "2.14.0"}))
    assert len({cpu, local, lockvariants.inputs_hash(text, lockvariants.resolution("cuda", text))}) == 3
    assert len(set(lockvariants.LOCK_NAMES.values())) == len(lockvariants.VARIANTS)


def test_the_image_lock_holds_nothing_installed_and_asks_for_cpu_torch() -> None:
    how = lockvariants.resolution("cpu", "torch>=2.6\nnumpy\n", {"torch": "2.13.0+cpu", "numpy": "2.4.6"})
    assert how.constraints == () and how.torch_build == "cpu"
    assert lockvariants.resolution("cpu", "numpy\n").torch_build is None  # no torch: nothing to ask of it
    pipcompile._cpu_build(how, ["numpy==2.4.6", "torch==2.13.0+cpu", "triton==3.1.0"])
    with pytest.raises(BuildError, match="CPU builds of torch") as e:
        pipcompile._cpu_build(how, ["torch==2.13.0", "torchvision==0.28.0+cpu"])
    assert "torch==2.13.0" in e.value.message and "whl/cpu" in str(e.value.hint)


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def test_a_lock_is_reused_while_its_inputs_hold_and_check_says_when_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "proj"
    root.mkdir()
    (root / "requirements.in").write_text("six>=1\n")
    assert lockplan.is_stale(root, None) == (True, "no lockfiles/requirements.lock.txt")
    plan = lockplan.plan_lock(root, None)
    assert plan.ready is None and plan.digest
    plan.cached.parent.mkdir(parents=True)
    plan.cached.write_text(f"six==1.17.0 \\\n    --hash=sha256:{_digest('six')}\n")
    lock = lockplan.complete(
        lockplan.plan_lock(root, None), reachable=_unasked
    )  # from the shared cache: no pip-compile
    assert lock.requirements == ["six==1.17.0"] and not lock.compiled
    assert lockfile.inputs_header(lock.path.read_text()) == plan.digest  # type: ignore[union-attr]
    assert lockplan.is_stale(root, None) == (False, "lockfiles/requirements.lock.txt is current")
    (root / "requirements.in").write_text("six>=1.16\n")
    stale, why = lockplan.is_stale(root, None)
    assert stale and "other inputs" in why


def test_a_background_lock_hands_over_its_lines_and_its_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "requirements.in").write_text("six>=1\n")

    def fake_compile(text, how, dest, on_line, previous=None, upgrade=None, *, reachable):  # type: ignore[no-untyped-def]
        on_line("Resolving six")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f"six==1.17.0 --hash=sha256:{_digest('six')}\n")

    monkeypatch.setattr(lockplan, "compile_lock", fake_compile)
    pending = lockplan.PendingLock(lockplan.plan_lock(tmp_path, None), _unasked)
    seen: list[str] = []
    lock = pending.result(seen.append)
    assert seen == ["Resolving six"] and lock.compiled and lock.requirements == ["six==1.17.0"]

    def failing(*a: object, **k: object) -> None:
        raise BuildError("pip-compile failed: no six")

    monkeypatch.setattr(lockplan, "compile_lock", failing)
    (tmp_path / "requirements.in").write_text("six>=99\n")
    with pytest.raises(BuildError, match="no six"):
        lockplan.PendingLock(lockplan.plan_lock(tmp_path, None), _unasked).result()


def test_locked_packages_list_the_lock_itself_with_how_each_was_installed() -> None:
    from repro.facts.lockfile import LockedPackage, locked_packages
    from repro.ui.records import lock_lines

    lock = (
        "antlr4-python3-runtime==4.9.3 \\\n    --hash=sha256:" + "a" * 64 + "\n"
        "Hydra_Core==1.3.2 --hash=sha256:" + "b" * 64 + "\n"
        "not a pin at all\n"
        "torch==2.13.0+cpu --hash=sha256:" + "c" * 64 + "\n"
    )
    kinds = {"antlr4-python3-runtime": "source", "hydra-core": "wheel", "torch": "carried\x1b[2J"}
    got = locked_packages(lock, ["six==1.0"], kinds)  # the lock wins over the record's own list
    assert got == [
        LockedPackage("antlr4-python3-runtime", "4.9.3", "source"),
        LockedPackage("hydra-core", "1.3.2", "wheel"),
        LockedPackage("torch", "2.13.0+cpu", "unknown"),  # a value repro does not write: unknown
    ]
    assert locked_packages(None, ["six==1.0"], {}) == [LockedPackage("six", "1.0", "unknown")]
    lines = lock_lines(got, in_image=True)
    assert lines[0] == ("source builds", "antlr4-python3-runtime==4.9.3")
    assert lines[1] == ("wheels", "hydra-core==1.3.2")
    assert lines[2] == ("locked", "torch==2.13.0+cpu  (wheel or source build: not recorded)")
    many = [LockedPackage(f"package-number-{i}", "1.0", "wheel") for i in range(30)]
    wrapped = lock_lines(many, in_image=True)
    assert wrapped[0][0] == "wheels" and all(k == "" for k, _ in wrapped[1:]) and len(wrapped) > 3
    assert all(len(v) <= 100 for _, v in wrapped)
    assert ", ".join(v for _, v in wrapped).count("package-number-") == 30
    local = lock_lines([LockedPackage("six", "1.0", "unknown")], in_image=False)
    assert local == [("locked", "six==1.0  (the host's environment, no image)")]


def test_a_run_takes_the_local_lock_only_where_this_interpreter_runs_it() -> None:
    from repro.config import Settings
    from repro.run.lock import lock_variant

    assert lock_variant(Settings(backend="local"), "all") == "local"
    assert lock_variant(Settings(backend="slurm", slurm_environment="python"), None) == "local"
    assert lock_variant(Settings(backend="slurm", slurm_environment="docker"), None) == "cpu"
    assert lock_variant(Settings(backend="docker"), None) == "cpu"
    assert lock_variant(Settings(backend="auto"), "all") == "cuda"
    assert lockvariants.lock_path(Path("/p"), "local") == Path("/p/.repro/locks/requirements-local.lock.txt")
    assert lockvariants.lock_path(Path("/p"), "cpu") == Path("/p/lockfiles/requirements.lock.txt")
