"""Each of two ranks starts a long `sleep` in a session of its own and leaves it behind."""

import os
import subprocess
from pathlib import Path

rank = int(os.environ["RANK"])
sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
Path("outputs").mkdir(exist_ok=True)
Path(f"outputs/sleeper{rank}.pid").write_text(str(sleeper.pid))
print(f"rank {rank} left sleep {sleeper.pid} behind", flush=True)
