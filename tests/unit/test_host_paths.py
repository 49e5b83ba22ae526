"""Which host paths a replay may show its command (repro/facts/hostpaths.py): the host decides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repro.facts import hostpaths
from repro.store import limits


@pytest.mark.parametrize(
    ("rel", "part"),
    [(".git", ".git"), (".git/config", ".git"), ("sub/.git", ".git"), (".repro/blobs", ".repro"),
     (".ssh/id_ed25519", ".ssh"), ("home/.netrc", ".netrc"), (".aws/credentials", ".aws"),
     (".config/gcloud/adc.json", ".config/gcloud"), (".docker/config.json", ".docker"),
     (".kaggle/kaggle.json", ".kaggle"), (".huggingface/token", ".huggingface"),
     (".cache/huggingface/token", ".cache/huggingface"), ("wandb/settings", "wandb/settings"),
     ("secret.env", "secret.env"), (".env", ".env"), (".env.local", ".env.local"),
     ("conf/prod.env", "prod.env"), (".git-credentials", ".git-credentials"), (".pypirc", ".pypirc")],
)  # fmt: skip
def test_private_locations_are_named_by_path(tmp_path: Path, rel: str, part: str) -> None:
    assert hostpaths.private_part(rel) == part
    assert hostpaths.refusal(tmp_path, rel) is not None


@pytest.mark.parametrize("rel", ["data", "data/train.csv", "wandb/run-1/files", ".config/app.yaml", "env/x"])
def test_ordinary_data_paths_may_be_shown(tmp_path: Path, rel: str) -> None:
    assert hostpaths.private_part(rel) is None and hostpaths.refusal(tmp_path, rel) is None


def test_a_link_is_judged_where_it_leads(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink(root / ".git", root / "data")
    os.symlink(tmp_path / "outside", root / "elsewhere")
    assert hostpaths.refusal(root, "data") == "it leads under .git"
    assert hostpaths.refusal(root, "elsewhere") == "it leads outside the data root"
    assert hostpaths.refusal(root, ".") == "it is the whole data root"


@pytest.mark.parametrize(
    ("name", "problem"),
    [("", "is empty"), ("/a", "starts with /"), ("a\\b", "backslash"), ("a\x1bb", "control"),
     ("a//b", "empty segment"), ("a/", "empty segment"), ("./a", ". or .."), ("a/../b", ". or .."),
     ("..", ". or ..")],
)  # fmt: skip
def test_member_names_in_canonical_form_only(name: str, problem: str) -> None:
    found = limits.member_name_problem(name)
    assert found is not None and problem in found
    assert (
        limits.member_name_problem("blobs/ab/abcdef") is None and limits.member_name_problem("a.json") is None
    )


def test_a_replay_shows_what_hashes_as_recorded_and_differing_data_only_from_the_user_s_root() -> None:
    from repro.rerun.inputs import HERE, NOWHERE, DataChoice, InputSource

    sources = [
        InputSource("data/train", HERE, 3, 30, True),
        InputSource("data/val", NOWHERE, 2, 20, True),  # present here, differs
        InputSource("data/gone", NOWHERE, 1, 10, False),
        InputSource(".git", NOWHERE, 0, 0, False, refused="it is under .git"),
    ]
    choice = DataChoice(sources)
    shown, withheld = choice.shown(user_root=False)
    assert shown == ["data/train"]
    assert any("data/val differs" in w and "--data-root" in w for w in withheld)
    assert any(".git is not shown" in w and "under .git" in w for w in withheld)
    shown, withheld = choice.shown(user_root=True)
    assert shown == ["data/train", "data/val"] and len(withheld) == 1


def test_a_resume_shows_a_run_from_elsewhere_only_data_as_recorded(tmp_path: Path) -> None:
    from repro.rerun.inputs import shown_inputs
    from repro.store.record import DataInput, Record
    from repro.store.treehash import hash_tree

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("1,2\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.csv").write_text("3,4\n")
    (tmp_path / "secret.env").write_text("TOKEN=x\n")
    record = Record(id="20260101-000000-eeee", created="2026-01-01T00:00:00+00:00")
    digest = hash_tree(tmp_path / "data", tmp_path).digest
    record.data.inputs = [
        DataInput("data", digest),
        DataInput("other", "0" * 32),
        DataInput("secret.env", "0" * 32),
    ]
    assert shown_inputs(record, tmp_path, own=False) == ["data"]
    assert shown_inputs(record, tmp_path, own=True) == ["data", "other"]
