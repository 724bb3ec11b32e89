# Shared by the CLI tests: `check NAME COMMAND...` runs COMMAND and counts a pass or a failure
# (naming NAME on stderr); `finish TEST` prints the tally and returns non-zero on any failure.
passed=0
failed=0
check() {
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name" >&2; fi
}
finish() {
  echo "$1: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
