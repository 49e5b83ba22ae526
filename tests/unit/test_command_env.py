"""Which recorded variables a command gets again (repro/facts/command_env.py)."""

from __future__ import annotations

import pytest

from repro.errors import UsageError
from repro.facts import command_env

RECORDED = {
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "OMP_NUM_THREADS": "8",
    "TORCH_HOME": "/home/alice/.cache/torch",  # a path of the recording machine
    "HF_HOME": "/data/hf",
    "WANDB_MODE": "offline",
    "HF_TOKEN": "***",
    "LD_PRELOAD": "/tmp/evil.so",
    "LD_LIBRARY_PATH": "/tmp/evil",
    "PYTHONPATH": "/tmp/evil",
    "PYTHONSTARTUP": "/tmp/evil.py",
    "BASH_ENV": "/tmp/evil.sh",
    "HTTPS_PROXY": "http://10.0.0.1:3128",
    "JEMALLOC_PRELOAD": "x",
    "NCCL_NET_PLUGIN": "evil",
    "TORCH_LOGS": "+dynamo\n\x1b[2J",
}


def test_the_safe_set_by_default_and_never_the_dangerous_names() -> None:
    passed = command_env.select(RECORDED)
    assert passed.env == {
        "OMP_NUM_THREADS": "8",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    }
    assert set(passed.refused) == {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "BASH_ENV", "HTTPS_PROXY",
        "JEMALLOC_PRELOAD", "NCCL_NET_PLUGIN", "TORCH_LOGS",
    }  # fmt: skip
    assert passed.held == ["HF_HOME", "TORCH_HOME", "WANDB_MODE"] and passed.redacted == ["HF_TOKEN"]
    notes = "\n".join(passed.notes())
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in notes and "LD_PRELOAD" in notes and "PYTHONPATH" in notes
    assert "--env NAME" in notes and "\x1b" not in notes


def test_env_names_widen_the_safe_set_but_never_lift_the_never_list() -> None:
    passed = command_env.select(RECORDED, asked=["TORCH_HOME", "LD_PRELOAD"], allowed=["WANDB_*"])
    assert passed.env["TORCH_HOME"] == "/home/alice/.cache/torch" and passed.env["WANDB_MODE"] == "offline"
    assert "LD_PRELOAD" not in passed.env and "LD_PRELOAD" in passed.refused
    assert "HF_TOKEN" not in passed.env  # a redacted value is never set
    assert command_env.unknown(["TORCH_HOME", "NOPE"], RECORDED) == ["NOPE"]


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PYTHONPATH", "http_proxy", "BASH_ENV", "1BAD", "A-B"])
def test_asking_for_a_never_name_is_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="never sets"):
        command_env.check_asked([name])
    command_env.check_asked(["TORCH_HOME"])


def test_values_are_bounded_and_malformed_entries_refused() -> None:
    huge = "1" * (command_env.MAX_VALUE + 1)
    passed = command_env.select({"TORCH_X": huge, "OMP_Y": "1" * 300, "TORCH_Z": 5, 7: "x"}, asked=["OMP_Y"])  # type: ignore[dict-item]
    assert passed.env == {"OMP_Y": "1" * 300}
    assert set(passed.refused) == {"TORCH_X", "TORCH_Z", "7"}


@pytest.mark.parametrize(
    ("name", "value"),
    [("NCCL_CONF_FILE", "nccl.conf"), ("NCCL_TOPO_FILE", "topo.xml"), ("TORCH_HOME", ".."),
     ("TORCH_EXTENSIONS_DIR", "ext"), ("NCCL_DEBUG_FILE", "x"), ("TORCH_CACHE_ROOT", "c"),
     ("TORCH_X", ".."), ("TORCH_X", "a..b"), ("NCCL_COMM_ID", "evil.example.com:29500"),
     ("NCCL_COMM_ID", "10.0.0.1:29500"), ("TORCH_X", "host:1234"), ("TORCH_X", "user@host"),
     ("TORCH_STORE", "tracker.example.com"), ("NCCL_SOCKET_IFNAME", "eth0"), ("TORCH_X", "localhost")],
)  # fmt: skip
def test_the_safe_set_takes_no_value_that_names_a_file_or_a_host(name: str, value: str) -> None:
    passed = command_env.select({name: value})
    assert name not in passed.env and name in passed.held, passed
    assert command_env.select({name: value}, asked=[name]).env == {name: value}  # the user may ask


@pytest.mark.parametrize(
    ("name", "value"),
    [("CUBLAS_WORKSPACE_CONFIG", ":4096:8"), ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"),
     ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,garbage_collection_threshold:0.6"),
     ("NCCL_DEBUG", "INFO"), ("OMP_NUM_THREADS", "4"), ("TORCH_DISTRIBUTED_DEBUG", "DETAIL"),
     ("NCCL_ALGO", "Ring,Tree"), ("TORCH_LOGS", "+dynamo,recompiles")],
)  # fmt: skip
def test_the_safe_set_keeps_plain_switches(name: str, value: str) -> None:
    assert command_env.select({name: value}).env == {name: value}
