# Sourced by dcblab-lldpad and dcblab-dcbapp (installed as
# /usr/lib/dcblab/daemon.sh): a daemon known by its pid file. The script
# defines err() (a message to stderr) before sourcing this.

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
