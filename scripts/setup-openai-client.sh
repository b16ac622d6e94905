#!/usr/bin/env bash
# Installs OpenAI's official Python client once, outside the repository, and prints the python
# that has it. The suite drives `aegis serve --upstream` with it as a prototype would
# (crates/aegis-cli/tests/guarded_chat.rs); scripts/bench-guarded-chat.sh measures with it.
exec bash "$(dirname "$0")/setup-python-tool.sh" openai 3.57.0 python
