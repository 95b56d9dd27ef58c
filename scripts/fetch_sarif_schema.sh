#!/usr/bin/env bash
# Fetches the SARIF 2.1.0 JSON schema the report tests validate quantdiff's
# SARIF against (issue 13; README "test-impl"). Never copied into the tree.
#
# It comes from Microsoft's npm package @microsoft/jest-sarif (the SARIF SDK's
# Jest matchers, MIT), which ships it as lib/schemas/sarif-2.1.0-rtm.5.json:
# the schema of SARIF 2.1.0 as released (rtm.5, JSON Schema draft-04), the
# version schemastore serves for 2.1.0. Pinned with the tarball's SHA-256
# (scripts/fetch_npm_file.sh fetches and verifies).
#
# Usage: scripts/fetch_sarif_schema.sh [--print-path]
#   Prints where the schema is; exit 0 when it is there, 1 when it could not
#   be fetched or did not verify, 2 on usage errors.
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
exec "$(dirname "$0")/fetch_npm_file.sh" sarif-schema "@microsoft/jest-sarif" 1.0.0-beta.0 \
  748e2c3d1a842e7bb258416685c7ea3a0da40005b72267b2052c2856d48ad102 \
  package/lib/schemas/sarif-2.1.0-rtm.5.json "$@"
