"""A training loop's console: a partial line while data loads, a tqdm bar on stderr, a coloured line."""

import argparse
import shutil
import sys
import time

try:
    from tqdm import tqdm
except ImportError:  # an image without tqdm: the same carriage-return redraws, by hand

    def tqdm(iterable, desc="", **kwargs):  # type: ignore[no-redef]
        items = list(iterable)
        for i, item in enumerate(items):
            sys.stderr.write(f"\r{desc}: {100 * i // len(items):3d}%| {i}/{len(items)}")
            sys.stderr.flush()
            yield item
        sys.stderr.write(f"\r{desc}: 100%| {len(items)}/{len(items)}\n")
        sys.stderr.flush()


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--pause", type=float, default=3.0)
args = parser.parse_args()

print("loading data...", end="", flush=True)
time.sleep(args.pause)
print(" done", flush=True)
print(f"tty {sys.stdout.isatty()} {sys.stderr.isatty()} {shutil.get_terminal_size().columns}", flush=True)
for step in tqdm(range(args.steps), desc="train", mininterval=0):
    time.sleep(0.05 + step * 0.001)
print("\033[32msaved\033[0m model.pt", flush=True)
