// SPDX-License-Identifier: GPL-2.0
/*
 * dcbapp-netprio - keep net_prio cgroups in line with the DCB APP table.
 *
 * DCBX (lldpad) installs IEEE 802.1Qaz APP entries (selector, protocol,
 * priority) into the kernel with DCB_CMD_IEEE_SET / _DEL, and dcbnl sends
 * each port's full table to RTNLGRP_DCB after every change.  For each entry
 * this keeps a net_prio cgroup, cgdcbx-SELECTOR-PROTOCOL (cgdcbxd's name),
 * whose net_prio.ifpriomap gives the entry's priority on the port and on
 * the VLAN devices on it (the PCP is chosen at the VLAN device, so a line
 * for the lower device alone would not do).  A task put in the cgroup sends
 * at that priority.  A DSCP entry and a port entry (TCP/SCTP, UDP/DCCP
 * or any port) also get rules in the nftables table inet dcbapp, since
 * traffic no task sends never meets a cgroup: soft-RoCE (rdma_rxe) sends
 * RoCEv2 from kernel sockets, only its RDMA writes with the QP's DSCP (its
 * connection MADs and SEND/ACK exchanges carry ToS 0), but every packet to
 * UDP port 4791, so a DSCP -> priority or port -> priority rule in the
 * output path reaches it (dcbapp.h has the whole story).  The table is
 * written whole by `nft -f -` (--nft PATH), only when the rules change.  What it does with each change, and with a removed entry's
 * cgroup that still has tasks, is in usage() below; the parser and the
 * engine are in dcbapp.c (see dcbapp.h).
 *
 *   dcbapp-netprio [-j] [--dev DEV]... [--cgroup-root DIR] [--sysfs DIR]
 *                  [--nft PATH] [--log FILE] [--once] [--dry-run]
 *                  [--cleanup] [-v]
 *
 * Exit 0 on SIGTERM/SIGINT or after --once, 1 when the system said no
 * (socket, cgroup root; with --once also a failed write or nft), 2 usage
 * errors.
 */
#define _GNU_SOURCE	/* ppoll */
#include "dcbapp.h"
#include "util.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#define MAX_DEVS	DCBAPP_MAX_PORTS
#define TICK_MS		1000	/* re-check kept cgroups and VLANs */
#define ONCE_WAIT	2.0	/* --once: seconds to wait for the replies */

struct opts {
	const char *cgroot, *sysfs, *log, *nft;
	int ndevs;
	const char *devs[MAX_DEVS];
	bool once, dry_run, cleanup, verbose;
};

static void usage(void)
{
	printf(
"usage: dcbapp-netprio [-j] [--dev DEV]... [--cgroup-root DIR] [--sysfs DIR]\n"
"                      [--nft PATH] [--log FILE] [--once] [--dry-run]\n"
"                      [--cleanup] [-v]\n"
"Keep one net_prio cgroup per DCB APP entry (IEEE 802.1Qaz, as lldpad\n"
"installs it): cgroup cgdcbx-SELECTOR-PROTOCOL (decimal, cgdcbxd's name),\n"
"whose net_prio.ifpriomap gives the entry's priority on the port and on\n"
"every VLAN device stacked on it.  Put a task in the cgroup and its traffic\n"
"gets that priority.  It listens to RTNLGRP_DCB and RTNLGRP_LINK, then asks\n"
"each port for its table (DCB_CMD_IEEE_GET; ports without DCB are skipped).\n"
"  - an entry that appears or changes priority is written at once; a port\n"
"    with several priorities for one (selector, protocol) gets the highest;\n"
"    one entry on two ports: each port's devices get their own priority in\n"
"    the same cgroup; a new VLAN device on a port gets the port's entries;\n"
"  - an entry that goes away sets its devices to 0 and the cgroup is\n"
"    removed; if tasks are still in it, it is kept with map 0 (their\n"
"    traffic falls back to priority 0), logged, and removed once empty\n"
"    (checked at every event and every second);\n"
"  - malformed input is logged: a broken message (lengths, name, entry\n"
"    size) changes nothing; an entry with a bad selector, priority or DSCP\n"
"    is skipped and its (selector, protocol) left as it was (dcbapp.h);\n"
"  - cgdcbx-* cgroups found at start are taken over, stale lines zeroed.\n"
"A DSCP entry (selector 5) or a port entry (2: TCP/SCTP, 3: UDP/DCCP, 4: any\n"
"of the four) gets its cgroup, and also nftables rules, since traffic that\n"
"no task sends meets no cgroup (soft-RoCE sends RoCEv2 from kernel sockets,\n"
"all of it to UDP 4791, only part with the QP's DSCP): in table inet dcbapp,\n"
"chain output, a packet leaving by the port or one of its VLAN devices with\n"
"that DSCP, or to that destination port over one of those protocols, and\n"
"without a priority of its own, gets the entry's priority (the highest, as\n"
"above, also when several entries name the packet: the rules go highest\n"
"priority first).  Such a packet gets it whatever the sender's cgroup: the\n"
"rule sets the priority before net_prio's map is read.  The table is\n"
"rewritten whole by one `nft -f -` (flushed, then defined) when the rules\n"
"change, and deleted when none is left; nft is not run while there is no\n"
"DSCP or port entry.  A failed nft is logged and retried at the next event\n"
"or second.  Every change is one log line, e.g.\n"
"  dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: cgroup cgdcbx-3-4791\n"
"  ifpriomap eth0 5, eth0.100 5\n"
"  dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: nft udp/dccp dport 4791\n"
"  priority 5 on eth0, eth0.100\n"
"  dcbapp-netprio: eth0: app sel 5 proto 26 prio 3: nft dscp 26 priority 3\n"
"  on eth0, eth0.100\n"
"  -d, --dev DEV          only this port (repeatable); default: all\n"
"  -c, --cgroup-root DIR  net_prio (v1) mount; default /sys/fs/cgroup/net_prio\n"
"  -s, --sysfs DIR        where class/net is; default /sys\n"
"      --nft PATH         the nft program for the DSCP and port rules;\n"
"                         default /usr/sbin/nft\n"
"  -l, --log FILE         append the log to FILE, not stderr\n"
"  -1, --once             read the tables, apply, print the state, exit\n"
"  -n, --dry-run          log what would be written, write nothing\n"
"  -C, --cleanup          at exit remove the cgdcbx-* cgroups without tasks,\n"
"                         then table inet dcbapp (default: SIGTERM/SIGINT\n"
"                         leave cgroups and table as they are)\n"
"  -v, --verbose          debug lines too (ports without DCB, ...)\n"
"  -j, --json             log lines and --once output as JSON objects\n"
"  -h, --help             this text\n"
"Exit status: 0 on SIGTERM/SIGINT or after --once, 1 on a system error\n"
"(netlink socket, cgroup root; with --once also any failed write or nft),\n"
"2 usage error.\n");
}

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'd':
		if (!dcbapp_valid_ifname(arg))
			return usage_error("--dev '%s' is not a device name",
					   arg);
		if (o->ndevs == MAX_DEVS)
			return usage_error("more than %d --dev", MAX_DEVS);
		o->devs[o->ndevs++] = arg;
		return 0;
	case 'c':
	case 's':
		if (!arg[0])
			return usage_error("--%s needs a directory",
					   c == 'c' ? "cgroup-root" : "sysfs");
		*(c == 'c' ? &o->cgroot : &o->sysfs) = arg;
		return 0;
	case 'N':
		if (!arg[0])
			return usage_error("--nft needs the path of the nft "
					   "program, e.g. /usr/sbin/nft");
		o->nft = arg;
		return 0;
	case 'l': o->log = arg; return 0;
	case '1': o->once = true; return 0;
	case 'n': o->dry_run = true; return 0;
	case 'C': o->cleanup = true; return 0;
	case 'v': o->verbose = true; return 0;
	}
	return usage_error("unknown option '-%c'", c);
}

static struct opts opts = {
	.cgroot = "/sys/fs/cgroup/net_prio", .sysfs = "/sys",
	.nft = "/usr/sbin/nft",
};
static FILE *logfp;
static bool json;
static struct dcbapp_state state;
/* Free-text log lines go through the engine's log, as its own do. */
#define logf_(...)	dcbapp_logf(&state, __VA_ARGS__)
static volatile sig_atomic_t stop_signal;

static void log_event(void *ctx, const struct dcbapp_event *ev)
{
	(void)ctx;
	if (ev->kind == DCBAPP_EV_DEBUG && !opts.verbose)
		return;
	dcbapp_print_event(logfp, json, ev);
}

static void report_malformed(void *ctx, const char *line)
{
	(void)ctx;
	logf_(DCBAPP_EV_MALFORMED, "%s", line);
}

static const struct dcbapp_report reporter = { report_malformed, NULL };

static int run_nft(void *ctx, const char *script, char *why, size_t whysz)
{
	(void)ctx;
	return dcbapp_nft_exec(opts.nft, script, why, whysz);
}

static bool selected(const char *dev)
{
	if (!opts.ndevs)
		return true;
	for (int i = 0; i < opts.ndevs; i++)
		if (!strcmp(opts.devs[i], dev))
			return true;
	return false;
}

/* The DCB_CMD_IEEE_GET requests still unanswered. */
static struct {
	uint32_t seq;
	char dev[IFNAMSIZ];
} pending[MAX_DEVS];
static int npending;
static uint32_t next_seq = 1;

static void answered(uint32_t seq, int err)
{
	for (int i = 0; i < npending; i++) {
		if (pending[i].seq != seq)
			continue;
		if (err)
			logf_(DCBAPP_EV_DEBUG, "%s: no IEEE DCB table: %s",
			      pending[i].dev, strerror(err));
		pending[i] = pending[--npending];
		return;
	}
}

static int ask(int fd, const char *dev)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	uint8_t req[64];
	size_t len = dcbapp_build_ieee_get(req, sizeof(req), dev, next_seq);

	if (!len)
		return -1;
	if (sendto(fd, req, len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0) {
		logf_(DCBAPP_EV_ERROR, "%s: DCB_CMD_IEEE_GET: %s", dev,
		      strerror(errno));
		return -1;
	}
	if (npending < MAX_DEVS) {
		pending[npending].seq = next_seq;
		/* dcbapp_build_ieee_get() took it: shorter than IFNAMSIZ */
		memcpy(pending[npending].dev, dev, strlen(dev) + 1);
		npending++;
	}
	next_seq++;
	return 0;
}

/* DCB_CMD_IEEE_GET to every selected device there is now. */
static void ask_all(int fd)
{
	char path[4096];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/net", opts.sysfs);
	d = opendir(path);
	if (!d) {
		logf_(DCBAPP_EV_ERROR, "%s: %s", path, strerror(errno));
		return;
	}
	npending = 0;
	while ((de = readdir(d)))
		if (dcbapp_valid_ifname(de->d_name) && selected(de->d_name))
			ask(fd, de->d_name);
	closedir(d);
}

static int open_socket(uint32_t *portid)
{
	static const int groups[] = { RTNLGRP_DCB, RTNLGRP_LINK };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	socklen_t salen = sizeof(sa);
	int fd, rcvbuf = 1 << 20;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_ROUTE);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	/* Before the first request: no change can fall between the two. */
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
			       &groups[i], sizeof(groups[i])) < 0)
			goto fail;
	if (getsockname(fd, (struct sockaddr *)&sa, &salen) < 0)
		goto fail;
	*portid = sa.nl_pid;
	return fd;
fail:
	close(fd);
	return -1;
}

static void handle(const struct dcbapp_msg *m, uint32_t portid, bool *dirty)
{
	static struct dcbapp_table t;
	struct dcbapp_link l;
	uint32_t seq;
	int err;

	switch (m->type) {
	case NLMSG_ERROR:
		if (!dcbapp_parse_error(m, &err, &seq, &reporter))
			answered(seq, err);
		return;
	case RTM_GETDCB:
	case RTM_SETDCB:
		switch (dcbapp_parse_dcb(m, &t, &reporter)) {
		case DCBAPP_TABLE:
			if (m->pid == portid)
				answered(m->seq, 0);
			if (!selected(t.ifname))
				return;
			logf_(DCBAPP_EV_DEBUG, "%s: table of %d entries",
			      t.ifname, t.n);
			dcbapp_set_table(&state, &t);
			*dirty = true;
			return;
		case DCBAPP_OTHER:
			logf_(DCBAPP_EV_DEBUG, "DCB message seq %u: cmd %u, "
			      "not an IEEE table", m->seq, t.cmd);
			return;
		case DCBAPP_MALFORMED:
			if (m->pid == portid)
				answered(m->seq, 0);
			return;
		}
		return;
	case RTM_NEWLINK:
	case RTM_DELLINK:
		if (dcbapp_parse_link(m, &l, &reporter))
			return;
		if (l.del)
			dcbapp_drop_port(&state, l.ifname);
		*dirty = true;
		return;
	}
}

/* Everything queued on fd; -1 when the socket failed. */
static int drain(int fd, uint32_t portid)
{
	static uint8_t buf[1 << 18];
	bool dirty = false;

	for (;;) {
		struct sockaddr_nl from;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_name = &from,
				     .msg_namelen = sizeof(from),
				     .msg_iov = &iov, .msg_iovlen = 1 };
		struct dcbapp_msg m;
		size_t off = 0;
		ssize_t n = recvmsg(fd, &mh, 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n < 0 && errno == ENOBUFS) {
			/* Events were lost: ask for every table again. */
			logf_(DCBAPP_EV_INFO, "netlink receive queue overrun: "
			      "reading every table again");
			ask_all(fd);
			continue;
		}
		if (n < 0) {
			logf_(DCBAPP_EV_ERROR, "netlink recvmsg: %s",
			      strerror(errno));
			return -1;
		}
		if (from.nl_pid) {
			logf_(DCBAPP_EV_DEBUG, "message from port %u, not the "
			      "kernel: ignored", from.nl_pid);
			continue;
		}
		if (mh.msg_flags & MSG_TRUNC) {
			logf_(DCBAPP_EV_MALFORMED, "netlink: datagram longer "
			      "than %zu bytes: dropped", sizeof(buf));
			continue;
		}
		while (dcbapp_next_msg(buf, n, &off, &m, &reporter) > 0)
			handle(&m, portid, &dirty);
	}
	if (dirty)
		dcbapp_reconcile(&state);
	return 0;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

static int run(int fd, uint32_t portid)
{
	struct sigaction sa = { .sa_handler = on_signal };
	double deadline = now() + ONCE_WAIT;
	sigset_t block, none;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &none);
	sigdelset(&none, SIGTERM);
	sigdelset(&none, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	ask_all(fd);
	while (!stop_signal) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct timespec tick = { TICK_MS / 1000,
					 TICK_MS % 1000 * 1000000L };
		int r;

		if (opts.once) {
			double left = deadline - now();

			if (!npending || left <= 0)
				break;
			tick.tv_sec = (time_t)left;
			tick.tv_nsec = (long)((left - tick.tv_sec) * 1e9);
		}
		/* Signals only inside ppoll: none lost between check and wait. */
		r = ppoll(&pfd, 1, &tick, &none);
		if (r < 0 && errno != EINTR)
			return runtime_error("poll: %s", strerror(errno));
		if (r > 0 && drain(fd, portid))
			return EXIT_FAILURE;
		if (r == 0 && !opts.once)
			dcbapp_reconcile(&state);
	}
	if (stop_signal) {
		logf_(DCBAPP_EV_INFO, "%s: exiting, cgroups left as they are%s",
		      strsignal(stop_signal),
		      opts.cleanup ? " but the empty ones" : "");
	} else {
		for (int i = 0; i < npending; i++)
			logf_(DCBAPP_EV_ERROR, "%s: no answer to "
			      "DCB_CMD_IEEE_GET in %.0f s", pending[i].dev,
			      ONCE_WAIT);
		dcbapp_reconcile(&state);
		dcbapp_print_state(stdout, json, &state);
	}
	if (opts.cleanup)
		dcbapp_cleanup(&state);
	return opts.once && state.errors ? EXIT_FAILURE : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		OPTION_ARG("dev", 'd'), OPTION_ARG("cgroup-root", 'c'),
		OPTION_ARG("sysfs", 's'), OPTION_ARG("log", 'l'),
		OPTION_ARG("nft", 'N'),	/* long only: -n is --dry-run */
		{ "once", no_argument, NULL, '1' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "cleanup", no_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		COMMON_OPTIONS
	};
	struct cli cli = { .shortopts = ":d:c:s:l:1nCvjh", .longopts = lo,
			   .usage = usage, .set = set_option, .ctx = &opts };
	struct dcbapp_config cfg = { 0 };
	struct stat st;
	uint32_t portid;
	int err, fd;

	progname = "dcbapp-netprio";
	err = parse_options(argc, argv, &cli);
	if (err)
		return err;
	json = cli.json;
	logfp = stderr;
	if (opts.log && !(logfp = fopen(opts.log, "ae")))
		return runtime_error("--log %s: %s", opts.log, strerror(errno));
	setvbuf(logfp, NULL, _IOLBF, 0);
	if (stat(opts.cgroot, &st) || !S_ISDIR(st.st_mode))
		return runtime_error("cgroup root %s: not a directory; mount "
				     "net_prio there (mount -t cgroup -o "
				     "net_prio none %s) or give --cgroup-root",
				     opts.cgroot, opts.cgroot);
	fd = open_socket(&portid);
	if (fd < 0)
		return runtime_error("netlink socket (NETLINK_ROUTE, groups "
				     "RTNLGRP_DCB and RTNLGRP_LINK): %s",
				     strerror(errno));
	cfg.cgroot = opts.cgroot;
	cfg.sysfs = opts.sysfs;
	cfg.dry_run = opts.dry_run;
	cfg.log = log_event;
	cfg.nft = run_nft;
	dcbapp_init(&state, &cfg);
	dcbapp_adopt(&state);
	if (!opts.once)
		logf_(DCBAPP_EV_INFO, "listening to RTNLGRP_DCB and "
		      "RTNLGRP_LINK (pid %d, cgroup root %s%s)", (int)getpid(),
		      opts.cgroot, opts.dry_run ? ", dry run" : "");
	err = run(fd, portid);
	close(fd);
	return err;
}
