#!/usr/bin/env bash
# cpu-load.sh runs a command under a background CPU load: busy workers that keep every core wanted,
# the condition a shared CI machine or a busy node puts the tests in. The load stops when the command
# ends, fails or is interrupted, so nothing is left running.
#
#   hack/cpu-load.sh [-n WORKERS] COMMAND [ARG...]   run COMMAND under the load, exit with its status
#   hack/cpu-load.sh [-n WORKERS] -t SECONDS          only the load, for SECONDS
#
# WORKERS defaults to twice the CPUs this process may run on (nproc), so the run queue holds about
# twice what the machine can serve and the load average climbs to about 2x the cores plus the
# command's own work. NETPOOL_LOAD_WORKERS sets the default.
#
# Examples:
#   hack/cpu-load.sh go test -race -count=1 ./allocator/kubestore/...
#   hack/cpu-load.sh -n 8 make test
set -euo pipefail

usage() {
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

workers=${NETPOOL_LOAD_WORKERS:-$((2 * $(nproc)))}
seconds=""
while getopts ":n:t:h" opt; do
	case $opt in
	n) workers=$OPTARG ;;
	t) seconds=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
if ! [[ $workers =~ ^[1-9][0-9]{0,3}$ ]]; then
	echo "cpu-load.sh: -n wants a count of workers from 1 to 9999, not \"$workers\"" >&2
	exit 2
fi
if [[ -n $seconds ]]; then
	if ! [[ $seconds =~ ^[1-9][0-9]{0,6}$ ]] || [[ $# -gt 0 ]]; then
		echo "cpu-load.sh: -t wants a whole number of seconds and no command" >&2
		exit 2
	fi
elif [[ $# -eq 0 ]]; then
	usage
fi

pids=()
cmd=""
stop_load() {
	# Only the workers this script started, by their process ids.
	if [[ ${#pids[@]} -gt 0 ]]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	pids=()
}
# On a signal the command is stopped too, so neither it nor the load outlives the script. It gets
# SIGTERM either way: a background command of a script ignores SIGINT.
on_signal() {
	if [[ -n $cmd ]]; then
		kill -TERM "$cmd" 2>/dev/null || true
		wait "$cmd" 2>/dev/null || true
	fi
	stop_load
	exit "$1"
}
trap stop_load EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

for _ in $(seq "$workers"); do
	# A subshell spinning on a builtin: no syscalls, no memory, all CPU. It dies with SIGTERM.
	(trap - INT TERM; while :; do :; done) &
	pids+=($!)
done
echo "cpu-load.sh: $workers busy workers on $(nproc) CPUs (pids ${pids[*]})" >&2

if [[ -n $seconds ]]; then
	set -- sleep "$seconds"
fi
# In the background and waited for, so a signal is handled at once rather than after the command.
"$@" &
cmd=$!
rc=0
wait "$cmd" || rc=$?
cmd=""
exit $rc
