"""The nondeterministic-op ledger, the effective switches, and what a run that used such ops promises."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from repro.backends.base import launch_argv
from repro.collect.reports import ledger
from repro.facts.determinism import expectation, explain_failure, plan, state_warnings, verifiable_mode
from repro.runtime import ledger as runtime_ledger
from repro.store.record import DeterminismInfo

STRICT = (
    "put_ does not have a deterministic implementation, "
    "but you set 'torch.use_deterministic_algorithms(True)'."
)
CUDA = (
    "upsample_bilinear2d_backward_out_cuda does not have a deterministic implementation, but you set "
    "'torch.use_deterministic_algorithms(True, warn_only=True)'."
)


def test_alerts_name_their_op_also_when_wrapped_by_a_dataloader_worker() -> None:
    assert runtime_ledger.op_of(STRICT) == "put_"
    assert runtime_ledger.op_of(CUDA) == "upsample_bilinear2d_backward_out_cuda"
    wrapped = f"Caught RuntimeError in DataLoader worker process 0.\nTraceback:\nRuntimeError: {STRICT}"
    assert runtime_ledger.op_of(wrapped) == "put_"
    cudnn = "cuDNN Attention defaults to a non-deterministic algorithm. To explicitly enable determinism ..."
    assert runtime_ledger.op_of(cudnn) == "cudnn_attention_backward"
    assert runtime_ledger.op_of("CUDA out of memory") is None


def test_the_ledger_keeps_each_process_s_last_count_and_sums_a_rank_s_processes() -> None:
    def ev(pid: int, rank: int, count: int, where: str = "t.py:3", step: int | None = None) -> dict[str, Any]:
        return {"e": "nd", "op": "put_", "pid": pid, "rank": rank, "where": where, "count": count,
                "first_step": step, "fatal": False}  # fmt: skip

    events = [ev(1, 0, 1, step=2), ev(1, 0, 2, step=2), ev(1, 0, 4, step=2), ev(2, 0, 3), ev(3, 1, 5, step=1)]
    ops, fatal = ledger(events)
    assert fatal is None
    assert ops == [
        {"op": "put_", "count": 7, "rank": 0, "where": "t.py:3", "first_step": 2},
        {"op": "put_", "count": 5, "rank": 1, "where": "t.py:3", "first_step": 1},
    ]
    _, fatal = ledger([{**ev(9, 1, 1), "fatal": True}])
    assert fatal == {"op": "put_", "where": "t.py:3", "rank": 1}


def test_a_fatal_alert_is_explained_in_one_line_with_the_opt_out() -> None:
    why = explain_failure(DeterminismInfo(mode="gpu"), {"op": "put_", "where": "train.py:9", "rank": 0}, [])
    assert why is not None and why["code"] == "nondeterministic_op"
    assert (
        why["message"] == "put_ at train.py:9 has no deterministic kernel, and gpu mode makes that an error"
    )
    assert "--allow-nondeterministic-ops" in why["hint"] and "\n" not in why["message"]


def test_strict_mode_explains_a_script_that_looked_for_a_gpu() -> None:
    tail = ['  File "train.py", line 2', "AssertionError: Torch not compiled with CUDA enabled"]
    why = explain_failure(DeterminismInfo(mode="strict"), None, tail)
    assert why is not None and why["code"] == "strict_hides_gpus" and "--mode gpu --gpus N" in why["hint"]
    assert explain_failure(DeterminismInfo(mode="gpu"), None, tail) is None


def test_gpu_mode_fails_on_nondeterministic_ops_unless_allowed() -> None:
    strict = plan("gpu", 1, None)
    assert "REPRO_ALLOW_NONDETERMINISTIC_OPS" not in strict.env
    assert strict.knobs["deterministic_warn_only"] is False and not strict.allow_nondeterministic_ops
    assert strict.env["NVTE_ALLOW_NONDETERMINISTIC_ALGO"] == "0"
    allowed = plan("gpu", 1, None, allow_nondeterministic_ops=True)
    assert allowed.env["REPRO_ALLOW_NONDETERMINISTIC_OPS"] == "1" and allowed.allow_nondeterministic_ops
    assert not plan("off", 1, None, allow_nondeterministic_ops=True).allow_nondeterministic_ops


def test_a_run_that_used_allowed_ops_is_never_held_to_bit_for_bit() -> None:
    used = DeterminismInfo(mode="strict", allow_nondeterministic_ops=True, applied=True)
    used.nondeterministic_ops = [{"op": "put_", "count": 3, "rank": 0, "where": "t.py:7", "first_step": None}]
    clean = DeterminismInfo(mode="strict", applied=True)
    assert verifiable_mode(clean, clean) == "strict"
    assert verifiable_mode(used, clean) == "gpu"
    assert verifiable_mode(DeterminismInfo(mode="strict", applied=False), clean) == "off"
    assert expectation(used) == (
        "the run used nondeterministic ops (put_ ×3 at t.py:7): "
        "expect within_tolerance at best, not identical"
    )
    assert expectation(clean) is None
    assert any("put_ ×3" in w.message for w in state_warnings(used))


def _fake_torch(**overrides: Any) -> SimpleNamespace:
    """A torch-shaped object with the switches a CUDA build has (no GPU needed to read them)."""
    cuda = SimpleNamespace(
        matmul=SimpleNamespace(allow_tf32=overrides.get("matmul_tf32", False)),
        flash_sdp_enabled=lambda: True,
        mem_efficient_sdp_enabled=lambda: False,
        math_sdp_enabled=lambda: True,
        cudnn_sdp_enabled=lambda: False,
    )
    cudnn = SimpleNamespace(deterministic=True, benchmark=overrides.get("benchmark", False), allow_tf32=False)
    return SimpleNamespace(
        backends=SimpleNamespace(cuda=cuda, cudnn=cudnn),
        are_deterministic_algorithms_enabled=lambda: True,
        is_deterministic_algorithms_warn_only_enabled=lambda: False,
        get_deterministic_debug_mode=lambda: 2,
        utils=SimpleNamespace(deterministic=SimpleNamespace(fill_uninitialized_memory=True)),
        get_float32_matmul_precision=lambda: "highest",
        get_num_threads=lambda: 1,
    )


def test_the_effective_gpu_switches_are_read_back_and_script_changes_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "flash_attn", SimpleNamespace())
    found = runtime_ledger.effective(_fake_torch(benchmark=True, matmul_tf32=True))  # type: ignore[arg-type]
    assert found["sdp_flash"] is True and found["sdp_mem_efficient"] is False and found["sdp_cudnn"] is False
    assert found["deterministic_debug_mode"] == 2 and found["fill_uninitialized_memory"] is True
    assert found["kernel_packages"] == ["flash_attn"]
    set_by_repro = {"cudnn_benchmark": False, "matmul_allow_tf32": False, "cudnn_deterministic": True}
    changed = runtime_ledger.changed(set_by_repro, found)
    assert changed == {
        "cudnn_benchmark": {"set": False, "found": True},
        "matmul_allow_tf32": {"set": False, "found": True},
    }
    det = DeterminismInfo(mode="gpu", effective=found, changed_by_script=changed)
    warnings = state_warnings(det)
    assert any("cudnn_benchmark True (repro set False)" in w.message for w in warnings)
    assert any("flash_attn" in w.message and w.code == "kernel_packages" for w in warnings)


def test_one_process_per_node_still_launches_torchrun() -> None:
    assert launch_argv(["python", "t.py"], 1) == ["python", "t.py"]
    argv = launch_argv(["python", "t.py", "--lr", "1"], 1, torchrun=True)
    assert argv[:4] == ["python", "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc-per-node=1" in argv and argv[-3:] == ["t.py", "--lr", "1"]


def test_diff_names_the_nondeterministic_ops_as_the_cause_of_a_divergence() -> None:
    from repro.diff import diff_records
    from repro.store.record import FileEntry, Record

    a, b = Record(id="a", created="t"), Record(id="b", created="t")
    for r, digest in ((a, "1" * 32), (b, "2" * 32)):
        r.determinism = DeterminismInfo(mode="gpu", allow_nondeterministic_ops=True, applied=True)
        r.results.outputs = [FileEntry("model.pt", 4, digest)]
    a.determinism.nondeterministic_ops = [
        {"op": "index_add_cuda_", "count": 12, "rank": 0, "where": "train.py:40", "first_step": 0}
    ]
    causes = [c.reason for c in diff_records(a, b, lambda digest: None).likely_causes]
    assert causes[0] == "nondeterministic ops ran in a (allowed): index_add_cuda_ ×12 at train.py:40"


def test_settings_the_runtime_could_not_apply_are_reported_not_printed(tmp_path: Path) -> None:
    from repro.collect.reports import read_reports

    event = {"e": "error", "where": "torch", "error": "set_num_interop_threads failed"}
    (tmp_path / "proc.7.jsonl").write_text(json.dumps(event) + "\n" + json.dumps(event) + "\n{trunc")
    assert read_reports(tmp_path).errors == ["torch: set_num_interop_threads failed"]
