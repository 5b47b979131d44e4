/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dcbapp-netprio's two halves, apart from its sockets and options so the
 * unit tests run them on bytes and on a directory in /tmp:
 *
 * The parser: pure functions over a received buffer (no I/O, no global
 * state).  It reads the dcbnl messages net/dcb/dcbnl.c builds with
 * dcbnl_ieee_fill() (the RTNLGRP_DCB notification after every
 * DCB_CMD_IEEE_SET / _DEL, and the reply to DCB_CMD_IEEE_GET), each the
 * full APP table of one port, and the RTM_NEWLINK / RTM_DELLINK of
 * RTNLGRP_LINK.  Every problem is reported, one line naming the message,
 * the attribute and why, through a dcbapp_report callback.
 *
 * What a malformed message changes (nothing, or only its valid entries):
 *   - broken framing (nlmsghdr or nlattr lengths, a truncated nest,
 *     leftover bytes), a bad or missing DCB_ATTR_IFNAME, no APP table, a
 *     DCB_ATTR_IEEE_APP whose payload is not a 4-byte struct dcb_app, or
 *     more than DCBAPP_MAX_ENTRIES entries: the whole message is ignored
 *     and the port keeps the table it had, since a table read in part
 *     would make the entries it lost look deleted;
 *   - an entry with an unknown selector (not 1..5), a priority above 7 or
 *     a DSCP above 63: that entry is skipped and its (selector, protocol)
 *     is "frozen": the port keeps whatever it had for that pair, so an
 *     invalid entry neither creates, changes nor removes a cgroup.  The
 *     message's other entries are applied.
 *
 * The engine: the ports' tables in, cgroups and net_prio.ifpriomap writes
 * out.  Each (selector, protocol) present on some port has one net_prio
 * cgroup, cgdcbx-SELECTOR-PROTOCOL (decimal, cgdcbxd's name), whose
 * ifpriomap gives each port holding the pair its priority (the highest,
 * when the port holds several), on the port and on every VLAN device
 * stacked on it (found under SYSFS/class/net/PORT/upper_*, DEVTYPE=vlan in
 * the upper's uevent; VLANs on VLANs too).  An entry that goes away sets
 * its devices to 0 and the cgroup is removed once no entry uses it and no
 * task is in it; a cgroup with tasks stays, map 0, and is removed when
 * empty (checked at every dcbapp_reconcile()).  What the engine wrote is
 * kept in memory, so a reconcile writes and logs only what changed.
 *
 * DSCP entries (selector 5) and port entries (2: TCP or SCTP, 3: UDP or
 * DCCP, 4: any of the four) also become nftables rules, because a cgroup
 * only reaches traffic of sockets a task owns: soft-RoCE (rdma_rxe) sends
 * RoCEv2 from kernel sockets that no net_prio cgroup holds.  Only its RDMA
 * writes carry the QP's DSCP; the rdma_cm connection MADs (rxe's QP1) and
 * the SENDs and ACKs of an exchange such as perftest's carry ToS 0, so a
 * DSCP rule alone leaves them in the best-effort class, and a connection
 * made while that class is overloaded waits for them.  Every
 * RoCEv2 packet goes to UDP port 4791, and the APP entry every RoCE
 * deployment guide installs names it: UDP 4791 -> priority 3 (`dcb app add
 * dev eth0 dgram-port-prio 4791:3`, lldpad app=3,3,4791).  For each port
 * holding such entries, the port and the same VLAN devices as above get,
 * per entry, a rule in the output hook that gives a packet leaving by that
 * device the entry's priority (the port's highest for the pair, as above)
 * when it has that DSCP (IPv4 and IPv6) or, for a port entry, goes to that
 * destination port over one of the selector's transport protocols; unless
 * the packet has a priority of its own (SO_PRIORITY, IP_TOS...; net_prio
 * leaves those alone too).  The rules are written highest priority first
 * and each only sets a priority where none is set yet, so a packet that
 * several entries name (DSCP 26 and UDP 4791, or UDP 4791 under selectors
 * 3 and 4) gets the highest of their priorities.  The output hook sees the
 * device the route chose, the VLAN device for tagged traffic, before the
 * VLAN device maps skb->priority to the PCP, and a datagram whole, before
 * IP fragments it; net_prio's map is read later, in __dev_queue_xmit(),
 * and skb_update_prio() leaves a priority set here alone: for traffic a
 * rule names, the rule's priority wins over the sender's cgroup.  The rules
 * live in a table of their own, "table inet dcbapp", written whole by one
 * nft script (see dcbapp_nft_script()) through the dcbapp_config's nft
 * callback, only when the wanted rules differ from the ones last applied,
 * so nothing runs nft while no port holds a DSCP or port entry.  The
 * engine does not read the table back (that would run nft at every
 * start): a table an earlier run left (killed, or without --cleanup) is
 * replaced by the first script, which flushes it, and stays until then.
 * An nft that fails changes nothing (a script is one transaction); the
 * error is counted and the script retried at the next dcbapp_reconcile().
 */
#ifndef DCBLAB_DCBAPP_H
#define DCBLAB_DCBAPP_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DCBAPP_MAX_ENTRIES	1024	/* per port and message */
#define DCBAPP_MAX_PORTS	64
#define DCBAPP_MAX_CGROUPS	512
#define DCBAPP_MAX_DEVS		32	/* a port and its VLANs, per cgroup */
#define DCBAPP_PREFIX		"cgdcbx-"
/*
 * nft rules, one per (device, selector, protocol): one port and its VLANs
 * with every DSCP and as many port entries.  Every packet leaving the host
 * walks the chain, so this bounds the cost as much as the memory.
 */
#define DCBAPP_MAX_RULES	(128 * DCBAPP_MAX_DEVS)
#define DCBAPP_NFT_TABLE	"inet dcbapp"

/* A problem found in a message: one line, no newline. */
struct dcbapp_report {
	void (*fn)(void *ctx, const char *line);
	void *ctx;
};

/* One netlink message of a buffer; data points into that buffer. */
struct dcbapp_msg {
	uint16_t type, flags;
	uint32_t seq, pid;
	const uint8_t *data;	/* the nlmsghdr */
	size_t len;		/* nlmsg_len */
};

/*
 * The message at *off in buf[0..len): 1 and *off past it, 0 at the end,
 * -1 when the header is truncated or its nlmsg_len impossible (reported;
 * the rest of the buffer cannot be framed and is dropped).
 */
int dcbapp_next_msg(const uint8_t *buf, size_t len, size_t *off,
		    struct dcbapp_msg *m, const struct dcbapp_report *r);

/* struct dcb_app, in host order as the kernel copies it out. */
struct dcbapp_entry {
	uint8_t selector, priority;
	uint16_t protocol;
};

struct dcbapp_table {
	char ifname[IFNAMSIZ];
	uint8_t cmd;			/* DCB_CMD_IEEE_GET, _SET or _DEL */
	int n, nfrozen;
	struct dcbapp_entry e[DCBAPP_MAX_ENTRIES];
	/* (selector, protocol) of skipped entries; priority unused */
	struct dcbapp_entry frozen[DCBAPP_MAX_ENTRIES];
};

enum dcbapp_parsed {
	DCBAPP_TABLE,		/* *t holds a port's table */
	DCBAPP_OTHER,		/* a DCB message without an IEEE table (CEE,...) */
	DCBAPP_MALFORMED,	/* reported; ignore it */
};

/* An RTM_GETDCB or RTM_SETDCB message; see the top of this file. */
enum dcbapp_parsed dcbapp_parse_dcb(const struct dcbapp_msg *m,
				    struct dcbapp_table *t,
				    const struct dcbapp_report *r);

struct dcbapp_link {
	bool del;			/* RTM_DELLINK */
	int ifindex;
	char ifname[IFNAMSIZ];
};

/* RTM_NEWLINK / RTM_DELLINK; 0, or -1 when malformed (reported). */
int dcbapp_parse_link(const struct dcbapp_msg *m, struct dcbapp_link *l,
		      const struct dcbapp_report *r);

/* NLMSG_ERROR: the errno (positive; 0 for an ack) and the request's seq. */
int dcbapp_parse_error(const struct dcbapp_msg *m, int *err, uint32_t *seq,
		       const struct dcbapp_report *r);

/* The DCB_CMD_IEEE_GET request for ifname; its length, 0 if size is short. */
size_t dcbapp_build_ieee_get(uint8_t *buf, size_t size, const char *ifname,
			     uint32_t seq);

/* The kernel's dev_valid_name(): no '/', ':' or space, not "." or "..". */
bool dcbapp_valid_ifname(const char *name);

/* "known" selectors of IEEE 802.1Qaz: 1 ethertype .. 5 DSCP. */
const char *dcbapp_selector_name(unsigned int selector);

/* What the engine logs: one event, one line. */
enum dcbapp_event_kind {
	DCBAPP_EV_APP,		/* port's entry set: devs get prio */
	DCBAPP_EV_APP_GONE,	/* port's entry gone: devs back to 0 */
	DCBAPP_EV_MULTI,	/* several priorities for one entry */
	DCBAPP_EV_CREATED,	/* cgroup made */
	DCBAPP_EV_REMOVED,	/* cgroup removed */
	DCBAPP_EV_KEPT,		/* cgroup kept: it has tasks */
	DCBAPP_EV_RULE,		/* port's DSCP or port entry: devs' nft rules */
	DCBAPP_EV_RULE_GONE,	/* that entry gone: devs' rules removed */
	DCBAPP_EV_NFT_REMOVED,	/* the nft table removed (--cleanup) */
	DCBAPP_EV_MALFORMED,	/* text: what the parser reported */
	DCBAPP_EV_ERROR,	/* text: a write, mkdir, ... failed */
	DCBAPP_EV_INFO,		/* text */
	DCBAPP_EV_DEBUG,	/* text; printed with --verbose only */
};

struct dcbapp_event {
	enum dcbapp_event_kind kind;
	const char *port;	/* "" when not known (cgroup found at start) */
	const char *cgroup;
	struct dcbapp_entry app;
	uint8_t prio_mask;	/* DCBAPP_EV_MULTI: the priorities held */
	int ndevs;
	const char *devs[DCBAPP_MAX_DEVS];
	uint8_t prios[DCBAPP_MAX_DEVS];
	long tasks;		/* DCBAPP_EV_KEPT */
	const char *text;
	bool dry_run;
};

/*
 * One line to fp: "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5:
 * cgroup cgdcbx-3-4791 ifpriomap eth0 5, eth0.100 5", or with json one
 * object, {"event":"app","port":"eth0",...}.  DCBAPP_EV_RULE: "eth0: app
 * sel 5 proto 26 prio 3: nft dscp 26 priority 3 on eth0, eth0.100", or for
 * a port entry "eth0: app sel 3 proto 4791 prio 3: nft udp/dccp dport 4791
 * priority 3 on eth0, eth0.100".
 */
void dcbapp_print_event(FILE *fp, bool json, const struct dcbapp_event *ev);

struct dcbapp_config {
	const char *cgroot;	/* the net_prio hierarchy's mount point */
	const char *sysfs;	/* /sys, or a fake tree */
	bool dry_run;		/* log the writes, make none */
	/*
	 * cgroot is a plain directory (tests): a new cgroup gets empty
	 * net_prio.ifpriomap and cgroup.procs files, a write appends a line
	 * to ifpriomap (the last line for a device is its value), and rmdir
	 * first removes both files.
	 */
	bool fake_cgroupfs;
	void (*log)(void *ctx, const struct dcbapp_event *ev);
	void *log_ctx;
	/*
	 * Run an nft script as `nft -f -` does: 0, or -1 with why[] one line
	 * naming the program, its exit status and the first line of its
	 * stderr.  NULL: DSCP and port entries get their cgroup only, no nft
	 * rule.
	 */
	int (*nft)(void *ctx, const char *script, char *why, size_t whysz);
	void *nft_ctx;
};

struct dcbapp_dev {
	char name[IFNAMSIZ];
	char port[IFNAMSIZ];	/* whose entry set it; "" unknown */
	uint8_t prio;
};

struct dcbapp_cgroup {
	struct dcbapp_entry key;	/* priority unused */
	char name[32];
	bool exists;			/* the directory is there (or would be) */
	bool kept_logged;
	long kept_tasks;
	int ndevs;
	struct dcbapp_dev devs[DCBAPP_MAX_DEVS];	/* written, nonzero */
};

/*
 * One nft rule: packets leaving by dev that the entry (selector, protocol)
 * names get prio.  selector 5: protocol is the DSCP; 2, 3, 4: the
 * destination port, over TCP or SCTP, UDP or DCCP, any of the four.
 */
struct dcbapp_rule {
	char dev[IFNAMSIZ];
	char port[IFNAMSIZ];	/* whose entry it is */
	uint8_t selector, prio;
	uint16_t protocol;
};

struct dcbapp_port {
	char name[IFNAMSIZ];
	int n;
	struct dcbapp_entry e[DCBAPP_MAX_ENTRIES];
};

/* Large: make it static. */
struct dcbapp_state {
	struct dcbapp_config cfg;
	int nports, ncgroups;
	struct dcbapp_port ports[DCBAPP_MAX_PORTS];
	struct dcbapp_cgroup cgroups[DCBAPP_MAX_CGROUPS];
	int errors;			/* failed writes, mkdirs, rmdirs, nft */
	/*
	 * The rules the last script that succeeded put in the table, sorted
	 * by (dev, selector, protocol): the script is a function of them.
	 */
	int nrules;
	struct dcbapp_rule rules[DCBAPP_MAX_RULES];
	char nft_error[320];		/* the last nft error logged */
};

void dcbapp_init(struct dcbapp_state *s, const struct dcbapp_config *cfg);
/* One free-text event (kind INFO, ERROR, MALFORMED or DEBUG) through the
 * state's log callback; an ERROR counts in s->errors. */
void dcbapp_logf(struct dcbapp_state *s, enum dcbapp_event_kind kind,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * Take over the cgdcbx-* cgroups already under cgroot (an earlier run's):
 * their nonzero ifpriomap lines count as written, so the next reconcile
 * keeps what is still wanted and zeroes and removes the rest.
 */
void dcbapp_adopt(struct dcbapp_state *s);
/* t becomes the port's table (frozen pairs keep their old entries). */
void dcbapp_set_table(struct dcbapp_state *s, const struct dcbapp_table *t);
/* The port is gone: as if its table were empty. */
void dcbapp_drop_port(struct dcbapp_state *s, const char *port);
/*
 * Bring the cgroups, and the nft rules of the DSCP and port entries, in
 * line with the tables and the devices now.
 */
void dcbapp_reconcile(struct dcbapp_state *s);
/*
 * Remove every managed cgroup without tasks, then the nft table if this
 * run put rules in it (--cleanup at exit).
 */
void dcbapp_cleanup(struct dcbapp_state *s);
/*
 * The managed cgroups and their maps, and the nft rules when there are
 * any: one object, for --once.
 */
void dcbapp_print_state(FILE *fp, bool json, const struct dcbapp_state *s);

/*
 * The nft script that makes table inet dcbapp hold exactly rules r[0..n)
 * (the engine sorts them by device, selector, protocol), written to buf
 * like snprintf(): the length it needs, buf NUL-terminated when it fits.
 * One transaction and idempotent under `nft -f -`: the table is declared
 * (made if missing), flushed, then defined again with its one base chain;
 * for n == 0 the table is deleted instead (declared first, so that
 * deleting a missing table is no error), so a host without DSCP or port
 * entries keeps no hook in its output path.  The rules go in priority
 * order, highest first (r's order within a priority).  Per rule, e.g.
 *   oifname "eth0" ip dscp 26 meta priority none counter
 *   meta priority set 0:3
 * (one line) and the same with ip6; for a port entry one line,
 *   oifname "eth0" meta l4proto { udp, dccp } th dport 4791
 *   meta priority none counter meta priority set 0:3
 * with { tcp, sctp } for selector 2 and all four for selector 4.
 */
size_t dcbapp_nft_script(char *buf, size_t size,
			 const struct dcbapp_rule *r, int n);

/*
 * `nft -f -` with script on its stdin: fork, exec of the program at path
 * nft (no PATH search), its stdout to /dev/null, its stderr kept.  0 when
 * it exits 0; -1 with why[] ("/usr/sbin/nft -f -: exit status 1: <first
 * stderr line>") otherwise, also when it cannot run or is still running
 * after 10 s (then killed).  The daemon's dcbapp_config.nft.
 */
int dcbapp_nft_exec(const char *nft, const char *script, char *why,
		    size_t whysz);

#endif
