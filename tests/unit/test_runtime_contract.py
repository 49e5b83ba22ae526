"""The host ↔ runtime contract: one rule for seeds, file names, mode switches and metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.facts.determinism import plan
from repro.facts.seeds import make_seeds
from repro.runtime import api, contract


def test_file_names_per_rank() -> None:
    assert contract.ranked(contract.KNOBS_FILE, 0) == "knobs.rank0.json"
    assert contract.ranked(contract.KNOBS_FILE, -1) == "knobs.json"
    assert contract.ranked(contract.METRICS_FILE, "*") == "metrics.rank*.jsonl"
    assert contract.logged_file(contract.METRICS_FILE, 0) == "metrics.jsonl"
    assert contract.logged_file(contract.PARAMS_FILE, 3) == "params.rank3.json"


def test_a_streams_file_and_log_names_give_back_their_rank() -> None:
    """The resume trace's files and log names per rank, read back by the collector and the check."""
    rtrace = contract.STREAMS["rtrace"]
    assert [rtrace.file_rank(rtrace.name(r)) for r in (0, 3)] == [0, 3]
    assert [rtrace.log_name(r) for r in (0, 3)] == ["rtrace.rank0", "rtrace.rank3"]
    assert [rtrace.log_rank(rtrace.log_name(r)) for r in (0, 3)] == [0, 3]
    for foreign in ("rtrace.jsonl", "rtrace.rank03.jsonl", "rtrace.rankx.jsonl", "ops.rank0.jsonl"):
        assert rtrace.file_rank(foreign) is None, foreign
    ops = contract.STREAMS["ops"]
    assert (ops.file_rank("ops.jsonl"), ops.file_rank("ops.rank2.jsonl")) == (-1, 2)
    assert contract.STREAMS["report"].file_rank("proc.12.jsonl") is None  # named by pid, not rank


def test_metrics_reader_skips_half_written_and_foreign_lines() -> None:
    text = "\n".join(
        [
            json.dumps({"name": "loss", "value": 0.5, "step": 0}),
            "12",  # a line cut after its first digits is valid JSON, but no row
            '["loss", 1]',
            json.dumps({"name": "loss"}),
            "",
            json.dumps({"name": "acc", "value": 0.9, "step": 1}),
            '{"name": "loss", "value": 0.2',  # the process was killed mid-write
        ]
    )
    rows = contract.metric_rows(text)
    assert [(r["name"], r["value"]) for r in rows] == [("loss", 0.5), ("acc", 0.9)]


@pytest.mark.parametrize("master", [0, 42, 2**32 - 1])
def test_one_seed_rule_for_the_record_the_runtime_and_the_api(
    master: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = make_seeds(master, world_size=3)
    for rank in range(3):
        expected = contract.rank_seed(master, rank)
        assert 0 <= expected < 2**32
        assert info.per_rank[str(rank)]["torch"] == expected
        monkeypatch.setenv(contract.SEED_ENV, str(master))
        monkeypatch.setenv("RANK", str(rank))
        assert api.seed() == expected
    assert contract.rank_seed(2**32 - 1, 1) == 0  # wraps, as NumPy needs


@pytest.mark.parametrize("mode", contract.MODES)
def test_the_record_lists_the_switches_the_runtime_sets(mode: str) -> None:
    det = plan(mode, threads=2, isa=None)
    switches = contract.torch_switches(mode, 2, warn_only=False)
    assert bool(switches) == contract.pins(mode) == (mode != "off")
    for name in ("deterministic_algorithms", "threads", "interop_threads", "cudnn_deterministic"):
        assert det.knobs.get(name) == switches.get(name)
    assert det.env[contract.MODE_ENV] == mode
    assert ("cudnn_allow_tf32" in switches) == (mode == "gpu") == ("tf32" in det.knobs)


def test_api_writes_where_the_host_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.RUN_ID_ENV, "r1")
    monkeypatch.setenv(contract.RUNTIME_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("RANK", raising=False)
    api.log_metric("loss", 0.25, step=3)
    rows = contract.metric_rows((tmp_path / contract.METRICS_FILE).read_text())
    assert rows == [{"name": "loss", "value": 0.25, "step": 3}]
