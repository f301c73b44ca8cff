# Sourced by the command-line tests: `expect RC REGEX CMD...` runs CMD (stdin closed, 120 s at
# most), and fails the test unless it exits with RC and its output (stdout and stderr together)
# matches the extended regular expression REGEX. `finish` ends the test with the verdict.
failures=0
expect() {
  local want=$1 regex=$2 out rc
  shift 2
  out=$(timeout 120 "$@" </dev/null 2>&1)
  rc=$?
  if [[ $rc -ne $want ]] || ! printf "%s" "$out" | grep -zqE -- "$regex"; then
    printf 'FAIL: %s\n  wanted exit %s and output matching /%s/; got exit %s and:\n%s\n' \
      "$*" "$want" "$regex" "$rc" "$(sed 's/^/    /' <<<"$out" | head -20)"
    failures=$((failures + 1))
  else
    printf 'ok: %s (exit %s)\n' "$*" "$rc"
  fi
}
finish() {
  ((failures == 0)) || { echo "$failures case(s) failed"; exit 1; }
  echo "all cases passed"
}
