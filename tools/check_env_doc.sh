#!/usr/bin/env bash
# Fails when docs/environment.md's generated table differs from `conflux-info --markdown`.
set -euo pipefail
info="$1"; doc="$2"
want=$("$info" --markdown)
have=$(sed -n '/BEGIN GENERATED/,/END GENERATED/p' "$doc" | sed '1d;$d')
if [[ "$want" != "$have" ]]; then
  echo "docs/environment.md is out of date; regenerate its table with: conflux-info --markdown"
  diff <(echo "$have") <(echo "$want") || true
  exit 1
fi
echo "docs/environment.md matches conflux-info"
