# Sourced by dcblab-lldpad, dcblab-dcbapp and dcblab-pfcd (installed as
# /usr/lib/dcblab/daemon.sh): a daemon known by its pid file. The script
# defines say() and err() (a message to stdout, to stderr) before sourcing
# this.

# daemon_running PIDFILE COMM: prints the pid in PIDFILE if a process of
# that name runs with it; false otherwise.
daemon_running() {
	local pid comm
	read -r pid 2>/dev/null < "$1" || return 1
	read -r comm 2>/dev/null < /proc/$pid/comm || return 1
	[ "$comm" = "$2" ] && echo $pid
}

# daemon_kill PID NAME TIMEOUT: SIGTERM, SIGKILL after TIMEOUT seconds
# (ticks of 0.1 s); false, with a message, if the process survives.
daemon_kill() {
	local pid=$1 name=$2 timeout=$3 waited=0
	kill -TERM $pid
	while kill -0 $pid 2>/dev/null; do
		if [ $waited -ge $((timeout * 10)) ]; then
			err "$name (pid $pid) still there $timeout s after" \
				"SIGTERM: SIGKILL"
			kill -KILL $pid
			sleep 0.1
			break
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	if kill -0 $pid 2>/dev/null; then
		err "$name (pid $pid) survived SIGKILL"
		return 1
	fi
}

# daemon_start NAME PIDFILE LOG READY TIMEOUT CMD...: CMD in a session of
# its own (out of reach of the exec that ran the script and of a kill of
# that exec's process group), its output appended to LOG, its pid in
# PIDFILE; returns once LOG has a line matching READY (grep) after the
# start. False, with LOG's new lines, if CMD exits first, or with a
# message if nothing matched within TIMEOUT seconds.
daemon_start() {
	local name=$1 pidfile=$2 log=$3 ready=$4 timeout=$5 pid waited=0 lines
	shift 5
	lines=$(cat $log 2>/dev/null | wc -l)
	# A background job of this shell so that $! is the daemon's pid.
	/usr/bin/setsid "$@" </dev/null >>$log 2>&1 &
	pid=$!
	echo $pid > $pidfile
	while [ $waited -lt $((timeout * 10)) ]; do
		if ! kill -0 $pid 2>/dev/null; then
			err "$name (pid $pid) exited while starting:"
			tail -n +$((lines + 1)) $log >&2
			rm -f $pidfile
			return 1
		fi
		if tail -n +$((lines + 1)) $log | grep -q "$ready"; then
			say "$name started (pid $pid)"
			return 0
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	err "$name (pid $pid) did not log '$ready' within $timeout s"
	return 1
}
