#!/usr/bin/env bash
# Formats dreplay's C++ sources with clang-format and the repository's
# .clang-format (Google style at 100 columns).
#
#   tools/format.sh           # format every tracked .h/.cc in place
#   tools/format.sh --check   # list the files that are not formatted; exit 1 if any
#   tools/format.sh FILE...   # format these files only
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is missing; run tools/install_deps.sh" >&2
  exit 2
fi

if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.h' '*.cc' | grep -v '^third_party/')
fi

if [ "$check" -eq 0 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi

bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "format: $f is not formatted (tools/format.sh $f)"
    bad=$((bad + 1))
  fi
done
echo "format: ${#files[@]} files checked, ${bad} not formatted"
[ "$bad" -eq 0 ]
