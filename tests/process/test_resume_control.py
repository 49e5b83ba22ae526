"""The negative control's spoiled resume, in a real process: no RNG restore takes effect — neither the
runtime's at a checkpoint load nor the script's own (`torch.set_rng_state`, `random.setstate`,
`numpy.random.set_state`, as the Hugging Face Trainer's `rng_state.pth` does) — while an ordinary
resumed process restores them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import json, random
    import numpy as np
    import torch
    from repro.runtime import boot
    boot.boot()
    saved = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    before = (torch.rand(3).tolist(), random.random(), np.random.rand())
    torch.set_rng_state(saved[0]); random.setstate(saved[1]); np.random.set_state(saved[2])
    torch.random.set_rng_state(saved[0])
    after = (torch.rand(3).tolist(), random.random(), np.random.rand())
    print(json.dumps([a == b for a, b in zip(before, after)]))
    """
)


def _restored(tmp_path: Path, control: str | None) -> list[bool]:
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path), "REPRO_RESUMED_FROM": "r"}
    env.pop("RANK", None)
    env.pop("REPRO_RESUME_CONTROL", None)
    if control is not None:
        env["REPRO_RESUME_CONTROL"] = control
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    restored: list[bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return restored


def test_a_spoiled_resume_ignores_every_rng_restore_and_an_ordinary_one_does_not(tmp_path: Path) -> None:
    assert _restored(tmp_path / "ordinary", None) == [True, True, True]
    assert _restored(tmp_path / "control", "rng") == [False, False, False]
