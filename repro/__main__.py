from repro.cli import run

run()
