"""Big files, page cache warm: repro's hashing throughput against `xxh128sum` on the same bytes.

python benchmarks/bench_hash_big.py            # REPRO_BENCH_BIG_MB=2048 by default
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    INFO,
    PY,
    Row,
    Sample,
    ensure_xxh128sum,
    log,
    print_rows,
    run_timed,
    scratch,
    time_inprocess,
)

from repro.store.hashing import hash_file
from repro.store.treehash import hash_tree

PEER = "xxh128sum"


def _write_random(path: Path, nbytes: int) -> None:
    chunk = os.urandom(16 << 20)
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
            chunk = chunk[1:] + chunk[:1]  # no two chunks alike


def run(repeats: int = 5) -> list[Row]:
    """Rows for one big file and for a directory of four big files."""
    size_mb = int(os.environ.get("REPRO_BENCH_BIG_MB", "2048"))
    xxh = ensure_xxh128sum()
    target = ">= 1.0x"
    if xxh is None:
        why = "xxh128sum not found and could not be installed (apt-get install xxhash)"
        return [Row("1 big file", PEER, None, None, target, "speedup", 1.0, skipped=why)]
    rows = []
    with scratch("repro-bench-big-") as tmp:
        big = tmp / "big.bin"
        log(f"writing a {size_mb} MiB file")
        _write_random(big, size_mb << 20)
        parts = tmp / "parts"
        parts.mkdir()
        for i in range(4):
            _write_random(parts / f"shard-{i}.bin", (size_mb << 20) // 4)
        shards = sorted(str(p) for p in parts.iterdir())

        # Same bytes, same algorithm: the digests must agree.
        theirs = subprocess.run([xxh, str(big)], capture_output=True, text=True, check=True).stdout.split()[0]
        ours = hash_file(big)
        if theirs != ours:
            raise SystemExit(f"digest mismatch: xxh128sum {theirs} vs repro {ours}")
        log("digests agree; timing (page cache warm)")

        peer, inproc, subproc = Sample(), Sample(), Sample()
        peer_tree, repro_tree = Sample(), Sample()
        code = (
            "import sys; from pathlib import Path; from repro.store.hashing import hash_file;"
            "hash_file(Path(sys.argv[1]))"
        )
        for _ in range(repeats):
            peer.add(*run_timed([xxh, str(big)]))
            inproc.add(*time_inprocess(lambda: hash_file(big)))
            subproc.add(*run_timed([PY, "-c", code, str(big)]))
            peer_tree.add(*run_timed([xxh, *shards]))
            repro_tree.add(*time_inprocess(lambda: hash_tree(parts, tmp)))

    gb = (size_mb << 20) / 1e9

    def note(s: Sample) -> str:
        return f"{gb / s.wall:.2f} GB/s"

    rows.append(
        Row(
            f"1 file, {size_mb} MiB (hash_file)",
            PEER,
            peer,
            inproc,
            target,
            "speedup",
            1.0,
            note=f"peer {note(peer)}, repro {note(inproc)}",
        )
    )
    rows.append(
        Row(
            f"1 file, {size_mb} MiB, new process",
            PEER,
            peer,
            subproc,
            INFO,
            "speedup",
            0.0,
            note="includes Python start-up and import",
        )
    )
    rows.append(
        Row(
            f"4 files, {size_mb} MiB total (hash_tree)",
            PEER,
            peer_tree,
            repro_tree,
            target,
            "speedup",
            1.0,
            note=f"peer {note(peer_tree)}, repro {note(repro_tree)}",
        )
    )
    return rows


def main() -> None:
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "5"))))


if __name__ == "__main__":
    main()
