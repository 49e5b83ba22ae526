"""Hash a tree in a fresh process, as a command-line check would.

python benchmarks/_hash_tree_cli.py ROOT [CACHE_DB]
"""

from __future__ import annotations

import sys
from pathlib import Path

from repro.store.statcache import HashCache
from repro.store.treehash import hash_tree


def main() -> None:
    root = Path(sys.argv[1])
    if len(sys.argv) > 2:
        with HashCache(Path(sys.argv[2])) as cache:
            tree = hash_tree(root, root, cache)
    else:
        tree = hash_tree(root, root)
    print(tree.digest, len(tree.files), tree.size)


if __name__ == "__main__":
    main()
