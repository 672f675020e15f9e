#!/bin/sh
# Runs the benchmark matrix on the host under the host's matrix lock, and releases the run's hold
# on package upgrades on the host when the matrix ends, whatever happens to the controller.
#
#   run_matrix.sh LOCK_FILE HOLD_FILE ARGV...
#
# Exit 75 when another matrix holds LOCK_FILE (nothing is started, nothing is released: the hold
# is that run's). Otherwise the exit status is the matrix's.
#
# The release is done by a watcher in a session of its own: it blocks on LOCK_FILE until no
# process holds it (this script execs the matrix, which keeps the lock's descriptor), so it runs
# when the matrix ends however it ends: normally, on a signal, or killed by Ansible's
# async_wrapper (killpg SIGKILL at the async timeout, which a trap could not catch). A controller
# that lost the host mid-run (issue #21) therefore leaves no hold behind. HOLD_FILE (the apt
# periodic settings the benchmark role wrote) is the marker: removed last, after snap's hold.
set -u
lock=$1
hold=$2
shift 2

exec 9>>"$lock"
flock --nonblock 9 || exit 75

setsid sh -c '
  flock "$1" true
  [ -e "$2" ] || exit 0
  if command -v snap >/dev/null 2>&1; then snap refresh --unhold; fi
  rm -f "$2"
' specbench-release "$lock" "$hold" 9>&- </dev/null >/dev/null 2>&1 &

exec "$@"
