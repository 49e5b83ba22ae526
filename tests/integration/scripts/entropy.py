"""Draws entropy the seeds cannot reach: the OS and the clock."""

import os
import time
from pathlib import Path

Path("outputs").mkdir(exist_ok=True)
Path("outputs/noise.bin").write_bytes(os.urandom(16) + str(time.time_ns()).encode())
print("wrote noise")
