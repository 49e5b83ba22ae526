import sys

print("starting")
sys.stderr.write("about to fail\n")
raise SystemExit("boom: the loss went to NaN")
