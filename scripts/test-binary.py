"""Prints the test executable that `cargo test --no-run --message-format=json` (on stdin) built
from the given test source, e.g. crates/aegis-store/tests/tests.rs; fails if there is none."""

import json
import os
import sys

source = os.path.abspath(sys.argv[1])
found = []
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") != "compiler-artifact" or not message.get("executable"):
        continue
    if os.path.abspath(message["target"]["src_path"]) == source and message["profile"]["test"]:
        found.append(message["executable"])
if len(found) != 1:
    sys.exit(f"test-binary: {len(found)} test executables built from {source}: {found}")
print(found[0])
