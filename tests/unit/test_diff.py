"""repro.diff on hand-built records, and its renderers in repro.ui.diff."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from repro.diff import (
    DIFF_FORMAT,
    SECTIONS,
    compare_versions,
    diff_records,
    divergences,
    first_divergence,
    group_by_dir,
    metric_rows,
    parse_pins,
    reverse_patch,
    split_patch,
)
from repro.errors import UsageError
from repro.store.record import CodeInfo, DepsInfo, FileEntry, ImageInfo, Record, SharedWrite
from repro.ui.diff import render_json, render_markdown, render_text
from tests.builders import Blobs, data_files, make_record, metrics_blob, other_results, same_as


@pytest.fixture
def blobs() -> Blobs:
    return Blobs()


@pytest.fixture
def leslie_dave(blobs: Blobs) -> tuple[Record, Record]:
    leslie = make_record(blobs, "leslie")
    dave = same_as(leslie, "dave")
    dave.data.inputs[0].files += [
        FileEntry(path=f"data/new/n{i}.csv", size=40, hash=f"n{i}") for i in range(3)
    ]
    dave.data.inputs[0].digest = "d2"
    dave.command.argv = ["python", "train.py"]
    dave.command.params = {}
    leslie.command.argv = ["python", "train.py", "--lr", "0.1", "--batch-size", "32"]
    dave.results.final_metrics = {"val_error": 0.528}
    dave.results.metrics = metrics_blob(blobs, [0.9, 0.8, 0.75])
    dave.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="m2")]
    return leslie, dave


# --------------------------------------------------------------------------- the story


def test_dave_and_leslie_first_lines_name_data_and_hyper_parameters(
    leslie_dave: tuple[Record, Record], blobs: Blobs
) -> None:
    leslie, dave = leslie_dave
    result = diff_records(leslie, dave, blobs)
    assert result.differs and result.results_differ
    assert [c.section for c in result.likely_causes[:2]] == ["data", "command"]
    first_three = render_text(result).splitlines()[:3]
    assert "leslie → dave" in first_three[0]
    assert first_three[1] == "  1. data changed: 3 files added (+120 B) in data/new/: n0.csv, n1.csv, n2.csv"
    assert "lr = 0.1 (removed)" in first_three[2] and "batch_size = 32 (removed)" in first_three[2]
    data = result.section("data")
    assert sorted(c.key for c in data.changes if c.kind == "added") == [
        f"data/new/n{i}.csv" for i in range(3)
    ]
    assert (
        data.groups[0].dir == "data/new/" and data.groups[0].added == 3 and data.groups[0].bytes_added == 120
    )


def test_hyper_parameter_changes_show_old_and_new(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.command.argv = ["python", "train.py", "--lr", "0.05", "--batch-size", "64"]
    b.command.params = {"lr": 0.05, "batch_size": 64}
    result = diff_records(a, b, blobs)
    section = result.section("command")
    by_key = {c.key: c for c in section.changes}
    assert set(by_key) == {"lr", "batch_size"}  # argv differs only by the values: no extra "argv" row
    assert (by_key["lr"].old, by_key["lr"].new, by_key["lr"].kind) == (0.1, 0.05, "changed")
    assert by_key["batch_size"].delta == 32
    assert not result.results_differ and result.likely_causes == []
    assert result.without_effect[0].reason == "hyper-parameters changed: batch_size 32 → 64, lr 0.1 → 0.05"


def test_script_change_is_reported_as_a_command_change(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.command.argv = ["python", "train2.py", "--lr", "0.1", "--batch-size", "32"]
    changes = diff_records(a, b, blobs).section("command").changes
    assert [c.key for c in changes] == ["argv"]


# --------------------------------------------------------------------------- identical runs


def test_two_runs_of_the_same_capsule_diff_empty(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    result = diff_records(a, b, blobs)
    assert not result.differs
    assert result.likely_causes == []
    assert render_text(result) == "No recorded differences between a and b."
    data = render_json(result)
    assert data["differs"] is False and all(not s["differs"] for s in data["sections"])


def test_show_all_lists_sections_without_differences(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    text = render_text(diff_records(a, same_as(a, "b"), blobs), show_all=True)
    for _, title in SECTIONS:
        assert f"{title} — same" in text


def test_nothing_recorded_differs_but_outputs_do(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.determinism.mode = a.determinism.mode = "gpu"
    b.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="other")]
    result = diff_records(a, b, blobs)
    assert result.results_differ
    assert [c.category for c in result.likely_causes] == ["nondeterminism"]
    assert result.likely_causes[0].reason == "no recorded difference — non-determinism under mode gpu"


def test_an_output_two_ranks_wrote_at_once_is_named_not_blamed_on_nondeterminism(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.results.shared_writes = [SharedWrite("outputs/model.pt", [0, 1], [41, 42])]
    b = same_as(a, "b")
    b.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="other")]
    result = diff_records(a, b, blobs)
    assert [c.category for c in result.likely_causes] == ["concurrency"]
    assert result.likely_causes[0].keys == ["outputs/model.pt"]
    assert "outputs/model.pt by ranks 0 and 1" in result.likely_causes[0].reason
    assert "non-determinism" not in render_text(result)


# --------------------------------------------------------------------------- dependencies


def test_lockfile_bump_is_an_upgrade_with_both_versions(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.deps.requirements = ["numpy==1.26.4", "torch==2.13.0", "tqdm==4.66.0"]
    b.deps.freeze = ["numpy==1.26.4", "torch==2.13.0", "tqdm==4.66.0"]
    result = diff_records(a, other_results(b), blobs)
    changes = result.section("dependencies").changes
    assert [(c.key, c.kind, c.old, c.new, c.scope) for c in changes] == [
        ("numpy", "upgraded", "1.26.0", "1.26.4", "lockfile"),
        ("tqdm", "added", None, "4.66.0", "lockfile"),
    ]  # the identical freeze change is not repeated
    assert result.likely_causes[0].category == "dependency"
    assert "numpy 1.26.0 → 1.26.4" in render_text(result)


def test_downgrade_from_lockfile_blob_and_installed_drift(blobs: Blobs) -> None:
    lock_a = blobs.put("numpy==1.26.4 \\\n    --hash=sha256:abc\nTorch==2.13.0 \\\n    --hash=sha256:def\n")
    lock_b = blobs.put("numpy==1.26.0 \\\n    --hash=sha256:abd\ntorch==2.13.0 \\\n    --hash=sha256:def\n")
    a = make_record(blobs, "a", deps=DepsInfo(lock_blob=lock_a, freeze=["numpy==1.26.4", "pillow==10.0.0"]))
    b = make_record(blobs, "b", deps=DepsInfo(lock_blob=lock_b, freeze=["numpy==1.26.0", "pillow==10.1.0"]))
    changes = diff_records(a, b, blobs).section("dependencies").changes
    assert [(c.key, c.kind, c.old, c.new, c.scope) for c in changes] == [
        ("numpy", "downgraded", "1.26.4", "1.26.0", "lockfile"),
        ("pillow", "upgraded", "10.0.0", "10.1.0", "installed"),
    ]


def test_base_image_change_is_a_dependency_change(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.deps.image = ImageInfo(id="sha256:1", tag="repro/x:1", base="python:3.11-slim", base_id="sha256:b1")
    b = same_as(a, "b")
    assert b.deps.image is not None
    b.deps.image.base_id = "sha256:b2"
    result = diff_records(a, other_results(b), blobs)
    assert result.section("dependencies").summary == "base image changed"
    assert result.likely_causes[0].section == "dependencies"


def test_a_local_run_and_a_docker_run_compare_only_the_packages_both_hold(blobs: Blobs) -> None:
    a = make_record(blobs, "a")  # on the host: its virtualenv holds the tools around the training too
    a.backend.name = "local"
    a.deps.freeze = ["click==8.1.7", "mypy==2.4.1", "numpy==1.26.0", "pytest==8.3.0", "repro-capsule==0.1.0",
                     "torch==2.13.0"]  # fmt: skip
    a.deps.site_fingerprint = "host"
    b = same_as(a, "b")  # in the image built from the lock: only what the lock pins
    b.backend.name = "docker"
    b.deps.image = ImageInfo(
        id="sha256:1", tag="repro-env:x", base="repro-base:bookworm", base_id="sha256:b1"
    )
    b.deps.freeze = ["numpy==1.26.4", "torch==2.13.0"]
    b.deps.site_fingerprint = "image"
    result = diff_records(a, other_results(b), blobs)
    deps = result.section("dependencies")
    installed = [(c.key, c.kind, c.old, c.new, c.detail) for c in deps.changes if c.scope == "installed"]
    assert installed == [
        (
            "(environment)",
            "changed",
            "host interpreter",
            "image",
            "4 packages installed on one side only, not compared",
        ),
        ("numpy", "upgraded", "1.26.0", "1.26.4", None),
    ]
    summary = "environment changed: host interpreter vs image, numpy 1.26.0 → 1.26.4, base image changed"
    assert deps.summary == summary
    text = render_text(result)
    assert "pytest" not in text and "mypy" not in text and "removed" not in text
    assert "environment changed: host interpreter vs image" in text

    d = same_as(b, "d")  # replayed on the local backend: the record keeps the image its original named
    d.backend.name, d.deps.freeze = "local", list(a.deps.freeze)
    changes = diff_records(b, other_results(d), blobs).section("dependencies").changes
    assert [(x.key, x.old, x.new) for x in changes if x.scope == "installed"][0] == (
        "(environment)",
        "image",
        "host interpreter",
    )

    c = same_as(b, "c")  # two runs in images: every package counts again
    assert c.deps.image is not None
    c.deps.freeze = ["numpy==1.26.4"]
    changes = diff_records(b, other_results(c), blobs).section("dependencies").changes
    assert [(x.key, x.kind) for x in changes if x.scope == "installed"] == [("torch", "removed")]


@pytest.mark.parametrize(
    ("old", "new", "order"),
    [
        ("1.9", "1.10", -1),
        ("2.0.0", "2.0", 0),
        ("2.1.0+cpu", "2.1.0", 1),
        ("1.0rc1", "1.0", -1),
        ("x-2", "x-10", -1),
    ],
)
def test_compare_versions(old: str, new: str, order: int) -> None:
    assert compare_versions(old, new) == order


def test_parse_pins_normalises_names_and_ignores_noise() -> None:
    lines = [
        "# comment",
        "Foo_Bar==1.0 ; python_version >= '3'",
        "-e .",
        "baz[extra]==2.0",
        "  --hash=sha256:x",
    ]
    assert parse_pins(lines) == {"foo-bar": "1.0", "baz": "2.0"}


# --------------------------------------------------------------------------- ranking


def test_causes_rank_inputs_before_dependencies_before_seed_before_hardware(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.determinism.mode = "gpu"
    b = same_as(a, "b")
    b.env.cpu_model = "EPYC"
    b.seeds.master = 2
    b.seeds.derived = {"python": 21, "numpy": 22, "torch": 23}
    b.deps.requirements = ["numpy==1.26.4", "torch==2.13.0"]
    b.code.commit = "b" * 40
    b.command.params = {"lr": 0.2, "batch_size": 32}
    b.command.argv = ["python", "train.py", "--lr", "0.2", "--batch-size", "32"]
    b.data.inputs[0].files[0] = FileEntry(path="data/s00000.csv", size=33, hash="changed")
    b.data.inputs[0].digest = "d2"
    result = diff_records(a, other_results(b), blobs)
    assert [(c.section, c.category) for c in result.likely_causes] == [
        ("data", "input"),
        ("command", "input"),
        ("code", "input"),
        ("dependencies", "dependency"),
        ("seeds", "seed"),
        ("environment", "hardware"),
    ]
    assert result.likely_causes[-1].reason.startswith(
        "environment differs under mode gpu: cpu_model Xeon → EPYC"
    )
    seeds = result.section("seeds")
    assert [c.key for c in seeds.changes] == ["master"]  # derived seeds follow the master seed


def test_hardware_under_strict_is_ranked_below_with_a_reason(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.env.cpu_model = "EPYC"
    result = diff_records(a, other_results(b), blobs)
    assert "strict mode" in result.likely_causes[0].reason


def test_hostname_alone_is_not_a_difference(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.env.hostname = "elsewhere"
    assert not diff_records(a, b, blobs).differs


def test_world_size_and_determinism_knobs(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.env.world_size = 2
    b.determinism.knobs = {"deterministic_algorithms": True, "tf32": True}
    b.determinism.threads = 4
    result = diff_records(a, other_results(b), blobs)
    det = result.section("determinism")
    assert {(c.key, c.kind) for c in det.changes} == {("threads", "changed"), ("tf32", "added")}
    assert [c.section for c in result.likely_causes] == ["environment", "determinism"]
    assert result.likely_causes[0].reason.startswith("world size changed: world_size 1 → 2")


def test_another_thread_count_is_the_likely_cause_before_the_hardware(blobs: Blobs) -> None:
    """Strict's default is the CPUs a run may use: the same run on a bigger machine ran at another N."""
    a = make_record(blobs, "a")
    a.determinism.threads, a.env.cpu_count = 2, 2
    b = same_as(a, "b")
    b.determinism.threads, b.env.cpu_count = 16, 16
    result = diff_records(a, other_results(b), blobs)
    assert result.likely_causes[0].section == "determinism"
    assert "threads 2 → 16" in result.likely_causes[0].reason


# --------------------------------------------------------------------------- data at scale


def test_ten_thousand_changed_files_summarise_by_directory(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    many: list[FileEntry] = []
    for d in range(25):
        many += data_files(f"data/shard{d:02d}", 400)
    b.data.inputs[0].files = a.data.inputs[0].files + many
    b.data.inputs[0].digest = "d2"
    result = diff_records(a, b, blobs)
    data = result.section("data")
    assert sum(1 for c in data.changes if c.kind == "added") == 10_000
    assert data.summary == "10000 files added (+312.5 KiB)"
    assert [g.dir for g in data.groups] == ["data/"]  # 25 shards > 20 groups: one level up
    text = render_text(result)
    assert len(text.splitlines()) < 40
    assert "10000 files in 1 directories" in text and "+10000" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_group_by_dir_keeps_directories_when_few() -> None:
    a_files = data_files("data/train", 3) + data_files("data/val", 2)
    from repro.diff import Change

    changes = [Change(key=f.path, kind="added", scope="file", new=f.size) for f in a_files]
    groups = group_by_dir(changes)
    assert [(g.dir, g.added, g.bytes_added) for g in groups] == [("data/train/", 3, 96), ("data/val/", 2, 64)]


def test_removed_and_changed_data_files(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    files = b.data.inputs[0].files
    b.data.inputs[0].files = files[2:]
    b.data.inputs[0].files[0] = FileEntry(path=files[2].path, size=64, hash="new")
    b.data.inputs[0].digest = "d2"
    data = diff_records(a, b, blobs).section("data")
    assert data.summary == "2 files removed (−64 B), 1 file changed (+32 B)"


# --------------------------------------------------------------------------- code


PATCH_B = """diff --git a/train.py b/train.py
index 1..2 100644
--- a/train.py
+++ b/train.py
@@ -1,3 +1,3 @@
 import torch
-lr = 0.1
+lr = 0.2
 print(lr)
diff --git a/model.py b/model.py
index 3..4 100644
--- a/model.py
+++ b/model.py
@@ -1,1 +1,2 @@
 x = 1
+y = 2
"""


def test_dirty_patch_files_with_line_counts_and_code_diff(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.code.dirty = True
    b.code.patch = blobs.put(PATCH_B)
    result = diff_records(a, other_results(b), blobs, code=True)
    code = result.section("code")
    files = {c.key: c.lines for c in code.changes if c.scope == "patch"}
    assert files == {"model.py": (1, 0), "train.py": (1, 1)}
    assert code.summary == "2 files changed (+2 −1)"
    assert code.patch is not None and "+lr = 0.2" in code.patch
    assert result.likely_causes[0].section == "code"
    assert "+lr = 0.2" in render_text(result)
    assert diff_records(a, b, blobs).section("code").patch is None


def test_patch_only_in_a_is_shown_reversed(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.code.dirty = True
    a.code.patch = blobs.put(PATCH_B)
    b = make_record(blobs, "b")
    code = diff_records(a, b, blobs, code=True).section("code")
    assert {c.key: c.lines for c in code.changes if c.scope == "patch"}["model.py"] == (0, 1)
    assert code.patch is not None and "-y = 2" in code.patch and "-lr = 0.1" not in code.patch


def test_split_and_reverse_patch() -> None:
    parts = split_patch(PATCH_B)
    assert list(parts) == ["train.py", "model.py"]
    rev = reverse_patch(parts["model.py"])
    assert "@@ -1,2 +1,1 @@" in rev and "-y = 2" in rev
    assert rev.index("--- b/model.py") < rev.index("+++ a/model.py")


def test_snapshot_files_diff_with_stored_blobs(blobs: Blobs) -> None:
    old = blobs.put("a = 1\nb = 2\n")
    new = blobs.put("a = 1\nb = 3\nc = 4\n")
    a = make_record(blobs, "a", code=CodeInfo(files=[FileEntry("pkg/m.py", 12, old, stored=True)]))
    b = make_record(blobs, "b", code=CodeInfo(files=[FileEntry("pkg/m.py", 18, new, stored=True)]))
    code = diff_records(a, b, blobs, code=True).section("code")
    assert [(c.key, c.lines) for c in code.changes] == [("pkg/m.py", (2, 1))]
    assert code.patch is not None and "--- a/pkg/m.py" in code.patch and "+c = 4" in code.patch


def test_commit_change_without_file_lists_suggests_git(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.code.commit = "c" * 40
    code = diff_records(a, b, blobs).section("code")
    assert code.summary == f"commit {'a' * 12} → {'c' * 12}"
    assert code.notes == [f"files changed between the commits: git diff --stat {'a' * 12} {'c' * 12}"]


def test_missing_patch_blob_is_reported_not_raised(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.code.patch = "f" * 32

    def failing(digest: str) -> bytes | None:
        raise OSError("gone")

    code = diff_records(a, b, failing).section("code")
    assert code.changes[-1].detail == "uncommitted changes differ (patch not available)"


# --------------------------------------------------------------------------- metrics and outputs


def test_metrics_final_deltas_and_first_divergence(leslie_dave: tuple[Record, Record], blobs: Blobs) -> None:
    leslie, dave = leslie_dave
    metrics = diff_records(leslie, dave, blobs).section("metrics")
    change, parted = metrics.changes
    assert (change.key, change.old, change.new) == ("val_error", 0.303, 0.528)
    assert change.delta == pytest.approx(0.225)
    assert (parted.key, parted.scope, parted.old, parted.new) == ("loss", "diverged", 0.7, 0.8)
    assert parted.detail == "first differs at step 1"
    assert metrics.divergence is not None
    assert (metrics.divergence.metric, metrics.divergence.step) == ("loss", 1)
    assert metrics.summary == "val_error 0.303 → 0.528 (+0.225), series diverge at step 1 (loss)"


def test_first_divergence_is_the_first_logged_row_that_differs() -> None:
    rows_a = [{"name": "b", "value": 1.0, "step": 0}, {"name": "a", "value": 1.0, "step": 5}]
    rows_b = [{"name": "b", "value": 2.0, "step": 0}, {"name": "a", "value": 2.0, "step": 5}]
    d = first_divergence(rows_a, rows_b)
    assert d is not None and (d.metric, d.step, d.a, d.b) == ("b", 0, 1.0, 2.0)
    assert first_divergence(rows_a, rows_a) is None
    shorter = first_divergence(rows_a, rows_a[:1])
    assert shorter is None  # metric "a" only in A: reported as a series change, not a divergence


def test_diff_and_replay_share_the_divergence_rule_with_the_tolerance_a_parameter() -> None:
    from repro.compare.metrics import compare_metrics
    from repro.compare.tolerance import Tolerance

    rows_a: list[dict[str, Any]] = [
        {"name": "loss", "value": v, "step": s} for s, v in enumerate([1.0, 0.5, 0.25])
    ]
    rows_b: list[dict[str, Any]] = [
        {"name": "loss", "value": v, "step": s} for s, v in enumerate([1.0, 0.5 + 1e-9, 0.3])
    ]
    exact = first_divergence(rows_a, rows_b)
    assert exact is not None and (exact.step, exact.a, exact.b) == (1, 0.5, 0.5 + 1e-9)
    loose = first_divergence(rows_a, rows_b, Tolerance(atol=1e-6, rtol=0.0))
    assert loose is not None and (loose.step, loose.b) == (2, 0.3)
    replayed = compare_metrics(rows_a, rows_b, Tolerance(atol=1e-6, rtol=0.0))
    assert replayed is not None and (replayed.name, replayed.step) == (loose.metric, loose.step)
    assert first_divergence(rows_a, rows_b, Tolerance(atol=0.1, rtol=0.0)) is None
    steps = first_divergence(rows_a, [dict(r, step=r["step"] + 1) for r in rows_a])
    assert steps is not None and (steps.step, steps.a, steps.b) == (0, None, None)


def test_harvested_series_join_the_logged_ones_each_with_its_first_divergent_step(blobs: Blobs) -> None:
    a, b = make_record(blobs, "a"), make_record(blobs, "b")
    harvested = [
        [{"name": "loss", "value": 9.0, "step": 0}, {"name": "val_loss", "value": 2.0, "step": 250}],
        [{"name": "loss", "value": 8.0, "step": 0}, {"name": "val_loss", "value": 2.5, "step": 250}],
    ]
    for record, rows in zip((a, b), harvested, strict=True):
        record.results.harvested = blobs.put("".join(json.dumps(r) + "\n" for r in rows))
    rows_a = metric_rows(a, blobs)
    assert [r["name"] for r in rows_a] == ["loss", "loss", "loss", "val_loss"]  # logged loss wins
    metrics = diff_records(a, b, blobs).section("metrics")
    assert [(c.key, c.detail) for c in metrics.changes if c.scope == "diverged"] == [
        ("val_loss", "first differs at step 250")
    ]
    assert divergences(rows_a, metric_rows(b, blobs))[0].step == 250


def test_outputs_and_status(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.results.status, b.results.exit_code = "failed", 1
    b.results.outputs = []
    outputs = diff_records(a, b, blobs).section("outputs")
    assert outputs.summary == "status succeeded → failed, 1 file removed (−1000 B)"


# --------------------------------------------------------------------------- rendering


def test_json_is_stable_and_documented(leslie_dave: tuple[Record, Record], blobs: Blobs) -> None:
    leslie, dave = leslie_dave
    data = render_json(diff_records(leslie, dave, blobs))
    assert list(data) == [
        "format", "a", "b", "differs", "results_differ", "likely_causes", "without_effect", "results",
        "sections",
    ]  # fmt: skip
    assert data["format"] == DIFF_FORMAT
    assert [s["name"] for s in data["sections"]] == [name for name, _ in SECTIONS]
    assert list(data["sections"][0]) == [
        "name", "title", "differs", "summary", "changes", "groups", "divergence", "patch", "notes"
    ]  # fmt: skip
    assert list(data["sections"][0]["changes"][0]) == [
        "key", "kind", "scope", "old", "new", "delta", "lines", "detail", "tensors"
    ]  # fmt: skip
    assert list(data["likely_causes"][0]) == ["position", "section", "category", "reason", "rank", "keys"]
    assert data["likely_causes"][0]["section"] == "data" and data["likely_causes"][0]["position"] == 1
    assert json.loads(json.dumps(data)) == data  # plain JSON types only
    docs = (Path(__file__).parents[2] / "docs" / "diff.md").read_text()
    for key in ("likely_causes", "without_effect", "results_differ", "results", "divergence", "bytes_delta"):
        assert f"`{key}`" in docs


def test_text_colour_only_when_asked(leslie_dave: tuple[Record, Record], blobs: Blobs) -> None:
    result = diff_records(*leslie_dave, blobs)
    assert "\033[" not in render_text(result)
    assert "\033[" in render_text(result, colour=True)


def test_text_fits_in_100_columns(leslie_dave: tuple[Record, Record], blobs: Blobs) -> None:
    leslie, dave = leslie_dave
    dave.command.argv = ["python", "train.py", "--note", "x" * 300]
    dave.command.params = {"note": "y" * 300}
    text = render_text(diff_records(leslie, dave, blobs), show_all=True)
    assert all(len(line) <= 100 for line in text.splitlines())


def test_markdown_tables(leslie_dave: tuple[Record, Record], blobs: Blobs) -> None:
    md = render_markdown(diff_records(*leslie_dave, blobs))
    assert md.startswith("### repro diff `leslie` → `dave`")
    assert "1. data changed: 3 files added" in md
    assert "| | item | A | B | detail |" in md
    assert "| + | `data/new/n0.csv` | — | 40 B |  |" in md


# --------------------------------------------------------------------------- plot


def test_plot_is_a_png_with_both_runs(tmp_path: Path) -> None:
    from repro.ui.diff import plot_metrics

    rows_a = [{"name": "loss", "value": 1.0 / (i + 1), "step": i} for i in range(10)]
    rows_b = [{"name": "loss", "value": 1.2 / (i + 1), "step": i} for i in range(10)]
    rows_b.append({"name": "acc", "value": 0.5, "step": 9})
    path = plot_metrics(rows_a, rows_b, ("leslie", "dave"), tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["$\\frac{a}{$", "loss $x$", "$\\invalidcommand$", "a$b", "_hidden", "\\$"])
def test_plot_draws_a_metric_name_as_text_never_as_mathtext(tmp_path: Path, name: str) -> None:
    """A metric name comes from the run (and from a capsule): ``$…$`` is shown as it is, not parsed."""
    from repro.ui.diff import plot_metrics

    rows = [{"name": name, "value": 1.0 / (i + 1), "step": i} for i in range(5)]
    svg = plot_metrics(rows, rows, ("a$x$", "b"), tmp_path / "curves.svg").read_text()
    assert "<svg" in svg


def test_plot_without_matplotlib_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from repro.ui.diff import plot_metrics

    real_import: Callable[..., object] = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(UsageError) as info:
        plot_metrics([], [], ("a", "b"), tmp_path / "x.png")
    assert info.value.hint == "pip install 'repro-capsule[plot]'"


def test_plot_without_metrics_is_a_usage_error(tmp_path: Path) -> None:
    from repro.ui.diff import plot_metrics

    with pytest.raises(UsageError, match="metric series"):
        plot_metrics([], [], ("a", "b"), tmp_path / "x.png")


def test_dirty_flag_alone_is_a_note_not_a_difference(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.code.dirty = True  # e.g. new, untracked data files make git report a dirty tree
    result = diff_records(a, b, blobs)
    assert not result.differs
    assert result.section("code").notes == [
        "working tree marked dirty only in B; the recorded code is identical"
    ]


def test_a_new_untracked_file_is_listed_once_when_file_contents_are_recorded() -> None:
    blobs = Blobs()
    a = make_record(blobs)
    a.code.files = [FileEntry("train.py", 10, blobs.put("print(1)\n"), True)]
    b = same_as(a, "run-b")
    notes = FileEntry("notes.md", 6, blobs.put("hello\n"), True)
    b.code.files = [*a.code.files, notes]
    b.code.untracked = [notes]
    b.code.patch = blobs.put("diff --git a/train.py b/train.py\n")
    keys = [c.key for c in diff_records(a, b, blobs).section("code").changes if c.scope != "git"]
    assert keys == ["notes.md"]


# --------------------------------------------------------------------------- telling the truth


def test_identical_results_come_first_and_invent_no_causes(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.command.argv = ["python", "train.py", "--lr", "0.1", "--batch-size", "64"]
    b.command.params = {"lr": 0.1, "batch_size": 64}
    b.env.cpu_model = "EPYC"
    result = diff_records(a, b, blobs)
    assert not result.results_differ and result.likely_causes == []
    assert [c.category for c in result.without_effect] == ["input", "hardware"]
    lines = render_text(result).splitlines()
    assert lines[0] == "a → b: results identical; 2 of 10 sections differ"
    assert lines[1:3] == [
        "  changed without effect on results:",
        "  - hyper-parameters changed: batch_size 32 → 64",
    ]
    assert "likely causes" not in render_text(result).lower()
    md = render_markdown(result)
    assert "Changed without effect on results" in md and "Likely causes" not in md
    data = render_json(result)
    assert data["likely_causes"] == [] and data["without_effect"][0]["section"] == "command"


def test_a_self_seeding_script_overrides_the_master_seed_which_is_never_a_cause(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.determinism.mode = "gpu"
    a.seeds.script_seeds = [{"api": "torch.manual_seed", "value": 1337, "where": "train.py:12"}]
    b = other_results(same_as(a, "b"))
    b.seeds.master, b.seeds.derived = 2, {"python": 21, "numpy": 22, "torch": 23}
    result = diff_records(a, b, blobs)
    seeds = result.section("seeds")
    (master,) = seeds.changes
    assert (master.key, master.old, master.new) == ("master", 1, 2)
    assert master.detail == "overridden by the script (torch.manual_seed(1337))"
    assert seeds.summary == "seed 1 → 2, overridden by the script (torch.manual_seed(1337))"
    assert [c.category for c in result.likely_causes] == ["nondeterminism"]
    assert "overridden by the script (torch.manual_seed(1337))" in render_text(result)

    c = same_as(a, "c")
    c.seeds.master, c.seeds.derived = 2, {"python": 21, "numpy": 22, "torch": 23}
    same = diff_records(a, c, blobs)  # identical results: listed among the differences, not a cause
    (moot,) = same.without_effect
    assert moot.reason == "seed changed: seed 1 → 2, overridden by the script (torch.manual_seed(1337))"

    b.seeds.script_seeds = [{"api": "torch.manual_seed", "value": 42, "where": "train.py:12"}]
    result = diff_records(a, b, blobs)
    (cause,) = result.likely_causes
    assert cause.category == "seed" and cause.reason == "seed changed: script torch.manual_seed 1337 → 42"
    assert cause.keys == ["script torch.manual_seed"]


def test_how_a_seed_was_chosen_is_not_a_change_when_its_value_is_equal(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.seeds.drawn = True
    b = other_results(same_as(a, "b"))
    b.seeds.drawn = False
    result = diff_records(a, b, blobs)
    seeds = result.section("seeds")
    assert not seeds.differs and seeds.notes == ["seed 1 in both (drawn in A, given in B)"]
    assert all(c.category != "seed" for c in result.likely_causes)
    assert "drawn True" not in render_text(result, show_all=True)


def test_a_fact_recorded_twice_is_one_row(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.determinism.knobs = {"threads": 1, "deterministic_algorithms": True}
    b = same_as(a, "b")
    b.determinism.mode, b.determinism.threads, b.determinism.knobs = "off", None, {}
    det = diff_records(a, b, blobs).section("determinism")
    assert [(c.key, c.kind) for c in det.changes] == [
        ("mode", "changed"),
        ("threads", "removed"),
        ("deterministic_algorithms", "removed"),
    ]
    text = render_text(diff_records(a, b, blobs))
    assert [line for line in text.splitlines() if line.lstrip().startswith("- threads")] == [
        "  - threads                   1 (removed)"
    ]


def test_tensorboard_outputs_diff_by_content_not_by_file_name(blobs: Blobs, tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    kept: dict[str, Path] = {}

    def run_outputs(name: str, losses: list[float]) -> list[FileEntry]:
        root = tmp_path / name
        with SummaryWriter(str(root / "runs" / f"Nov22_{name}")) as w:
            for step, loss in enumerate(losses):
                w.add_scalar("loss", loss, step)
        entries = []
        for p in sorted(root.rglob("*tfevents*")):
            digest = f"{name}-{p.name}"
            kept[digest] = p
            entries.append(FileEntry(p.relative_to(root).as_posix(), p.stat().st_size, digest, stored=True))
        return entries

    a = make_record(blobs, "a")
    b = same_as(a, "b")
    a.results.outputs = run_outputs("a", [0.9, 0.5])
    b.results.outputs = run_outputs("b", [0.9, 0.5])
    result = diff_records(a, b, blobs, open_blob=kept.get)
    assert not result.results_differ and not result.section("outputs").differs
    assert "values equal per tag and step" in result.section("outputs").notes[0]

    b.results.outputs = run_outputs("c", [0.9, 0.4])
    outputs = diff_records(a, b, blobs, open_blob=kept.get).section("outputs")
    (change,) = outputs.changes
    assert change.kind == "changed" and change.detail == "loss at step 1: 0.5 → 0.4"
    assert diff_records(a, b, blobs).section("outputs").differs  # no bytes to read: by hash, and they differ


def test_a_flag_added_on_the_command_line_is_one_hyper_parameter_row(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    b = other_results(same_as(a, "b"))
    b.command.argv = [*a.command.argv, "--momentum", "0.9"]
    b.command.params = {**a.command.params, "momentum": 0.9}
    result = diff_records(a, b, blobs)
    assert [(c.key, c.kind) for c in result.section("command").changes] == [("momentum", "added")]
    assert [c.reason for c in result.likely_causes] == ["hyper-parameters changed: momentum = 0.9 (added)"]


def test_what_repro_adds_to_a_command_is_never_a_cause(blobs: Blobs) -> None:
    a = make_record(blobs, "a")
    a.command.argv, a.command.params = ["python", "train.py", "optim.lr=0.1"], {"optim.lr": 0.1}
    a.command.injected = ["hydra.run.dir=outputs/2026-01-01/10-00-00"]
    a.results.outputs = [FileEntry(path="outputs/2026-01-01/10-00-00/model.pt", size=1000, hash="m1")]
    b = same_as(a, "b")
    b.command.injected = ["hydra.run.dir=outputs/2026-01-01/10-05-00"]
    b.results.outputs = [FileEntry(path="outputs/2026-01-01/10-05-00/model.pt", size=1000, hash="m2")]
    b.seeds.master = 2
    result = diff_records(a, b, blobs)
    assert not result.section("command").differs
    assert [c.section for c in result.likely_causes] == ["seeds"]
    (model,) = result.section("outputs").changes  # one model changed, in each run's own pinned directory
    assert (model.key, model.kind) == ("outputs/2026-01-01/10-00-00/model.pt", "changed")
    (note,) = result.section("outputs").notes
    assert "outputs/2026-01-01/10-05-00/… as outputs/2026-01-01/10-00-00/…" in note
    assert a.command.executed() == [*a.command.argv, "hydra.run.dir=outputs/2026-01-01/10-00-00"]


def test_plot_writes_svg_too_and_marks_each_first_divergence(tmp_path: Path) -> None:
    from repro.ui.diff import plot_metrics

    rows_a: list[dict[str, Any]] = [
        {"name": "loss", "value": 1.0 / (i + 1), "step": i * 10} for i in range(5)
    ]
    rows_b = [{**r, "value": r["value"] + (0.1 if r["step"] >= 20 else 0)} for r in rows_a]
    svg = plot_metrics(rows_a, rows_b, ("a", "b"), tmp_path / "curves.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "first divergence: step 20" in svg


def test_plot_names_the_formats_it_writes(tmp_path: Path) -> None:
    from repro.ui.diff import plot_metrics

    rows = [{"name": "loss", "value": 1.0, "step": 0}]
    with pytest.raises(UsageError, match="PNG or SVG, not .pdf") as info:
        plot_metrics(rows, rows, ("a", "b"), tmp_path / "curves.pdf")
    assert info.value.hint == "name the file curves.png or curves.svg"
