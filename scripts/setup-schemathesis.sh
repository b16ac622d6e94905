#!/usr/bin/env bash
# Installs schemathesis (the property-based API tester) once, outside the repository, and prints
# its path. The suite runs it against a live `aegis serve` to hold /openapi.json to what the
# server does (crates/aegis-cli/tests/serve.rs).
exec bash "$(dirname "$0")/setup-python-tool.sh" schemathesis 4.32.5 schemathesis
