"""Sealing a run with thousands of small outputs, and exporting it, against named floors.

    python benchmarks/bench_seal_export.py

Rows: `repro run` of a script writing 5,000 small outputs against the same run writing one (the
cost of sealing the outputs: hashing, storing, the record), and `repro export` of that run against
`tar cf` of the same output files. Interleaved (peer, repro, peer, repro …); medians.
Size: REPRO_BENCH_OUTPUTS (5000).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, log, median_sample, print_rows, repro_env, repro_exe, run_timed, scratch

WRITER = """\
import argparse, os
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=1)
args = p.parse_args()
out = Path("outputs")
out.mkdir(exist_ok=True)
for i in range(args.n):
    (out / f"sample_{i:05d}.txt").write_bytes(f"sample {i}\\n".encode() * 64)
print(f"wrote {args.n} files")
"""


def run(repeats: int = 3) -> list[Row]:
    n = int(os.environ.get("REPRO_BENCH_OUTPUTS", "5000"))
    repro = repro_exe()
    seal_case, export_case = f"sealing {n} small outputs", f"repro export of a run with {n} outputs"
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(
                seal_case, "the same run with 1 output", None, None, "< +0.3 s", "overhead", 0.3, skipped=why
            ),
            Row(export_case, "`tar cf` of the same files", None, None, "<= 3x", "within", 3.0, skipped=why),
        ]
    env = repro_env()
    with scratch("repro-bench-seal-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        (proj / "write.py").write_text(WRITER)
        one = [repro, "run", "--backend", "local", "--", "python", "write.py", "--n", "1"]
        many = [repro, "run", "--backend", "local", "--", "python", "write.py", "--n", str(n)]
        log("first run compiles the lockfile (untimed)")
        run_timed(one, cwd=proj, env=env)
        peer, ours = [], []
        for _ in range(repeats):
            peer.append(run_timed(one, cwd=proj, env=env))
            ours.append(run_timed(many, cwd=proj, env=env))
        rows = [
            Row(
                seal_case,
                "the same run writing 1 output",
                median_sample(peer),
                median_sample(ours),
                "< +0.3 s",
                "overhead",
                0.3,
                note="medians of interleaved runs",
            )
        ]
        tar_peer = ["tar", "cf", str(proj.parent / f"{proj.name}-peer.tar"), "outputs"]
        export = [repro, "export", "latest", "-o", str(proj.parent / f"{proj.name}-capsule.tar")]
        peer, ours = [], []
        try:
            for _ in range(repeats):
                peer.append(run_timed(tar_peer, cwd=proj, env=env))
                ours.append(run_timed(export, cwd=proj, env=env))
        finally:
            for name in (f"{proj.name}-peer.tar", f"{proj.name}-capsule.tar"):
                (proj.parent / name).unlink(missing_ok=True)
        rows.append(
            Row(
                export_case,
                "`tar cf` of the same files",
                median_sample(peer),
                median_sample(ours),
                "<= 3x",
                "within",
                3.0,
                note="medians of interleaved runs",
            )
        )
        return rows


if __name__ == "__main__":
    print_rows(run())
