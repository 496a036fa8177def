#!/usr/bin/env bash
# The bash completion of taskctl and taskcluster, as made at build time from
# their command lines: every subcommand their --help lists is offered, a
# subcommand's options are offered after it, global options too, and a
# directory option completes directories.
# usage: check-completion.sh BIN_DIR COMPLETION_DIR
set -euo pipefail
bin=$1
completions=$2
fail() { echo "check-completion: $*" >&2; exit 1; }
complete_words() {  # PROGRAM WORD... : what bash would offer for the last word
  local program=$1
  shift
  (
    # shellcheck disable=SC1090
    source "$completions/$program"
    COMP_WORDS=("$program" "$@")
    COMP_CWORD=$#
    COMPREPLY=()
    "_ztask_$program"
    printf '%s\n' "${COMPREPLY[@]}"
  )
}
subcommands_of() {  # the names under "SUBCOMMANDS:" in PROGRAM --help
  "$bin/$1" --help | awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1}'
}
options_of() {  # the long options PROGRAM SUBCOMMAND --help lists (its first column)
  "$bin/$1" "$2" --help |
    awk '/^  -/{n = split($1, names, ","); for (i = 1; i <= n; i++) if (names[i] ~ /^--/) print names[i]}' |
    sort -u
}

for program in taskctl taskcluster; do
  [ -f "$completions/$program" ] || fail "no completion script for $program"
  offered=$(complete_words "$program" "")
  subs=$(subcommands_of "$program")
  [ -n "$subs" ] || fail "$program --help lists no subcommand"
  for sub in $subs; do
    grep -qx "$sub" <<<"$offered" || fail "$program: subcommand $sub is not offered"
    offered_options=$(complete_words "$program" "$sub" "--")
    for option in $(options_of "$program" "$sub"); do
      grep -qx -- "$option" <<<"$offered_options" ||
        fail "$program $sub: $option is not offered"
    done
  done
done
[ "$(complete_words taskctl submit --pri)" = "--priority" ] || fail "taskctl submit --pri"
grep -qx -- "--profile-dir" <<<"$(complete_words taskctl status --prof)" ||
  fail "taskctl status: the global --profile-dir is not offered"
grep -qx -- "--engines" <<<"$(complete_words taskcluster start --eng)" || fail "taskcluster start --eng"
# An option's value is not read as a subcommand, and a directory option
# offers directories.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/profile_a"
touch "$tmp/profile_file"
( cd "$tmp" && [ "$(complete_words taskctl --profile-dir prof)" = "profile_a" ] ) ||
  fail "taskctl --profile-dir does not complete a directory"
grep -qx -- "--wait" <<<"$(complete_words taskctl --profile-dir submit submit --wa)" ||
  fail "taskctl --profile-dir DIR submit: the subcommand's options are not offered"
echo "check-completion: taskctl and taskcluster complete every subcommand and option"
