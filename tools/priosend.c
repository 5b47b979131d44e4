// SPDX-License-Identifier: GPL-2.0
/*
 * priosend - send numbered UDP or raw Ethernet frames from a chosen cgroup.
 *
 * The lab's sender: it joins a cgroup before opening its socket (so
 * net_prio tags the socket with that cgroup's prioidx), can set
 * SO_PRIORITY, and can move itself to another cgroup or change its
 * socket's SO_PRIORITY mid-stream while the socket stays open.  Every frame carries the payload of payload.h.
 */
#include "payload.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAYLOAD 1472

struct opts {
	struct cli cli;
	bool raw;
	const char *dest;
	const char *ifname;
	uint64_t port, count, rate, size, flow, ethertype;
	bool flow_set;
	const char *cgroup, *move_to;
	uint64_t move_after;
	bool move_after_set;
	uint64_t so_priority, so_priority_to, tos;
	bool so_priority_set, so_priority_to_set, tos_set;
	/* DEST, parsed: a MAC in raw mode, an IP address and port in udp */
	uint8_t mac[6];
	struct sockaddr_storage ip;
	socklen_t ip_len;
};

struct result {
	uint64_t sent, errors, retries;
	long long moved_at;	/* frames sent before the move/change, or -1 */
	double elapsed;
};

static void usage(void)
{
	printf(
"usage: priosend [OPTIONS] DEST\n"
"Send numbered frames (flow id + sequence number in each payload).\n"
"  DEST                    udp: IPv4/IPv6 address; raw: MAC aa:bb:cc:dd:ee:ff\n"
"  -m, --mode udp|raw      default udp\n"
"  -I, --interface IFACE   raw: interface to send on (required); udp: bind to it\n"
"  -p, --port N            udp destination port (default %d)\n"
"  -c, --count N           frames to send (default 1000)\n"
"  -r, --rate PPS          frames per second, 0 = as fast as possible (default)\n"
"  -s, --size N            payload bytes, %d..%d (default 64)\n"
"  -f, --flow ID           flow id in the payload (default: a random id\n"
"                          from %u up, new for each run, so that two senders\n"
"                          without --flow are told apart; printed as \"flow\")\n"
"  -g, --cgroup PATH       join cgroup PATH before opening the socket\n"
"  -M, --move-to PATH      move to cgroup PATH mid-stream, socket kept open\n"
"      --move-after N      frames sent before the move or the SO_PRIORITY\n"
"                          change (default count/2)\n"
"  -P, --so-priority N     set SO_PRIORITY N on the socket\n"
"      --so-priority-to N  set SO_PRIORITY N mid-stream, socket kept open\n"
"      --tos N             set IP_TOS N (IPV6_TCLASS for IPv6), 0..255,\n"
"                          before SO_PRIORITY if both are given\n"
"  -E, --ethertype N       raw mode ethertype (default 0x%04x)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"Output: frames sent, their flow id, time and rate, then if not 0:\n"
"  N refused  sends that failed with ECONNREFUSED: DEST answered an earlier\n"
"             UDP frame with an ICMP port unreachable (no UDP socket on\n"
"             --port there: priosink reads the interface, not a socket; the\n"
"             peer rate-limits these ICMPs). The refused frame is sent again,\n"
"             so N counts attempts, not lost frames (-j: \"errors\")\n"
"  N retries  sends retried after ENOBUFS or EAGAIN: a full queue\n",
		DEFAULT_PORT, PAYLOAD_LEN, MAX_PAYLOAD, FLOW_AUTO_MIN,
		DEFAULT_ETHERTYPE);
}

/* --move-after, --so-priority-to and --tos have no short form: 'A', 'T'
 * and 'Q' are not in the short options.
 */
static const struct option longopts[] = {
	OPTION_ARG("mode", 'm'), OPTION_ARG("interface", 'I'),
	OPTION_ARG("port", 'p'), OPTION_ARG("count", 'c'),
	OPTION_ARG("rate", 'r'), OPTION_ARG("size", 's'),
	OPTION_ARG("flow", 'f'), OPTION_ARG("cgroup", 'g'),
	OPTION_ARG("move-to", 'M'), OPTION_ARG("move-after", 'A'),
	OPTION_ARG("so-priority", 'P'), OPTION_ARG("so-priority-to", 'T'),
	OPTION_ARG("tos", 'Q'),
	OPTION_ARG("ethertype", 'E'),
	COMMON_OPTIONS,
};

static int join_cgroup(const char *path)
{
	char file[4096];
	FILE *f;

	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	f = fopen(file, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
		return runtime_error("cannot join cgroup %s: %s", path,
				     strerror(errno));
	return 0;
}

/* For the default flow id: getrandom(), else what differs per run too. */
static uint32_t random_u32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == sizeof(r))
		return r;
	return (uint32_t)getpid() * 2654435761u ^ (uint32_t)(now() * 1e9);
}

/* DEST into o->mac or o->ip; a bad DEST is a usage error. */
static int parse_dest(struct opts *o)
{
	struct sockaddr_in *in4 = (void *)&o->ip;
	struct sockaddr_in6 *in6 = (void *)&o->ip;

	if (o->raw)
		return parse_mac("DEST", o->dest, o->mac);
	if (inet_pton(AF_INET, o->dest, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(o->port);
		o->ip_len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, o->dest, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(o->port);
		o->ip_len = sizeof(*in6);
	} else {
		return usage_error("DEST '%s' is not an IPv4 or IPv6 address",
				   o->dest);
	}
	return 0;
}

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'm':
		if (!strcmp(arg, "raw"))
			o->raw = true;
		else if (strcmp(arg, "udp"))
			return usage_error("--mode '%s' is not udp or raw", arg);
		return 0;
	case 'I':
		o->ifname = arg;
		return 0;
	case 'p':
		return parse_u64("--port", arg, 1, 65535, &o->port);
	case 'c':
		return parse_u64("--count", arg, 1, 1000000000, &o->count);
	case 'r':
		return parse_u64("--rate", arg, 0, 100000000, &o->rate);
	case 's':
		return parse_u64("--size", arg, PAYLOAD_LEN, MAX_PAYLOAD,
				 &o->size);
	case 'f':
		o->flow_set = true;
		return parse_u64("--flow", arg, 0, UINT32_MAX, &o->flow);
	case 'g':
		o->cgroup = arg;
		return 0;
	case 'M':
		o->move_to = arg;
		return 0;
	case 'A':
		o->move_after_set = true;
		return parse_u64("--move-after", arg, 0, 1000000000,
				 &o->move_after);
	case 'P':
		o->so_priority_set = true;
		return parse_u64("--so-priority", arg, 0, UINT32_MAX,
				 &o->so_priority);
	case 'T':
		o->so_priority_to_set = true;
		return parse_u64("--so-priority-to", arg, 0, UINT32_MAX,
				 &o->so_priority_to);
	case 'Q':
		o->tos_set = true;
		return parse_u64("--tos", arg, 0, 255, &o->tos);
	case 'E':
		return parse_u64("--ethertype", arg, 0x600, 0xffff,
				 &o->ethertype);
	}
	return 0;
}

/* After parse_options(): what no single option can tell. */
static int check_args(struct opts *o, char **argv)
{
	o->dest = argv[optind];
	if (o->raw && !o->ifname)
		return usage_error("raw mode needs --interface");
	if (o->move_after_set && !o->move_to && !o->so_priority_to_set)
		return usage_error("--move-after needs --move-to or "
				   "--so-priority-to");
	if (o->raw && o->so_priority_to_set)
		return usage_error("--so-priority-to is for udp mode");
	if (o->raw && o->tos_set)
		return usage_error("--tos is for udp mode");
	if (!o->move_after_set)
		o->move_after = o->count / 2;
	if (!o->flow_set)
		o->flow = flow_auto(random_u32());
	return parse_dest(o);
}

/* A socket ready to send to DEST; -1 after the message on error. */
static int open_socket(const struct opts *o)
{
	int fd;

	/* Packet sockets do not connect: send_frames() uses sendto(). */
	if (o->raw)
		fd = socket(AF_PACKET, SOCK_DGRAM, htons(o->ethertype));
	else
		fd = socket(o->ip.ss_family, SOCK_DGRAM, 0);
	if (fd < 0) {
		runtime_error("%s socket: %s", o->raw ? "packet" : "udp",
			      strerror(errno));
		return -1;
	}
	if (!o->raw && o->ifname &&
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, o->ifname,
		       strlen(o->ifname)) < 0) {
		runtime_error("bind to %s: %s", o->ifname, strerror(errno));
		goto err;
	}
	if (!o->raw && connect(fd, (const void *)&o->ip, o->ip_len) < 0) {
		runtime_error("connect %s: %s", o->dest, strerror(errno));
		goto err;
	}
	/* IP_TOS sets sk_priority too (rt_tos2priority()): before
	 * SO_PRIORITY, so that an explicit --so-priority wins.
	 */
	if (o->tos_set) {
		int tos = (int)o->tos;
		bool v6 = o->ip.ss_family == AF_INET6;

		if (setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP,
			       v6 ? IPV6_TCLASS : IP_TOS, &tos,
			       sizeof(tos)) < 0) {
			runtime_error("%s %d: %s", v6 ? "IPV6_TCLASS" : "IP_TOS",
				      tos, strerror(errno));
			goto err;
		}
	}
	if (o->so_priority_set) {
		int prio = (int)(uint32_t)o->so_priority;

		if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio,
			       sizeof(prio)) < 0) {
			runtime_error("SO_PRIORITY %llu: %s",
				      (unsigned long long)o->so_priority,
				      strerror(errno));
			goto err;
		}
	}
	return fd;
err:
	close(fd);
	return -1;
}

/* Sleep until *next, then move *next on by one frame at rate. */
static void pace(struct timespec *next, uint64_t rate)
{
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL);
	next->tv_nsec += 1000000000ll / rate;
	while (next->tv_nsec >= 1000000000) {
		next->tv_nsec -= 1000000000;
		next->tv_sec++;
	}
}

static int send_frames(int fd, const struct opts *o, struct result *r)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(o->ethertype),
		.sll_halen = 6,
	};
	uint8_t buf[MAX_PAYLOAD] = { 0 };
	struct timespec next;
	uint32_t prio = (uint32_t)o->so_priority;
	double t0;

	if (o->raw) {
		sll.sll_ifindex = if_nametoindex(o->ifname);
		if (!sll.sll_ifindex)
			return runtime_error("interface %s: %s", o->ifname,
					     strerror(errno));
		memcpy(sll.sll_addr, o->mac, 6);
	}
	r->moved_at = -1;
	t0 = now();
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (r->sent < o->count) {
		struct payload p = { .flow = (uint32_t)o->flow, .seq = r->sent };
		ssize_t n;

		if ((o->move_to || o->so_priority_to_set) &&
		    r->sent == o->move_after && r->moved_at < 0) {
			if (o->move_to && join_cgroup(o->move_to))
				return EXIT_FAILURE;
			if (o->so_priority_to_set) {
				int to = (int)(uint32_t)o->so_priority_to;

				if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &to,
					       sizeof(to)) < 0)
					return runtime_error("SO_PRIORITY %d: %s",
							     to,
							     strerror(errno));
				prio = (uint32_t)to;
			}
			r->moved_at = (long long)r->sent;
		}
		p.so_priority = prio;
		if (o->rate)
			pace(&next, o->rate);
		payload_put(buf, &p);
		if (o->raw)
			n = sendto(fd, buf, o->size, 0, (void *)&sll,
				   sizeof(sll));
		else
			n = send(fd, buf, o->size, 0);
		if (n >= 0) {
			r->sent++;
		} else if (errno == ENOBUFS || errno == EAGAIN ||
			   errno == EINTR) {
			/* a full queue: wait for it to drain, send again */
			r->retries++;
			usleep(50);
		} else if (errno == ECONNREFUSED) {
			/* an ICMP unreachable from the peer: not ours */
			r->errors++;
		} else {
			return runtime_error("send: %s (after %llu frames)",
					     strerror(errno),
					     (unsigned long long)r->sent);
		}
	}
	r->elapsed = now() - t0;
	return 0;
}

static void print_result(const struct opts *o, const struct result *r)
{
	double pps = r->elapsed > 0 ? r->sent / r->elapsed : 0.0;

	new_json_obj(stdout, o->cli.json);
	print_uint(PRINT_ANY, "sent", "priosend: %llu frames", r->sent);
	print_uint(PRINT_ANY, "flow", " of flow %llu", o->flow);
	print_float(PRINT_ANY, "elapsed_s", " in %.3f s", r->elapsed);
	print_float(PRINT_ANY, "pps", " (%.0f pps)", pps);
	print_uint(r->errors ? PRINT_ANY : PRINT_JSON, "errors",
		   ", %llu refused", r->errors);
	print_uint(r->retries ? PRINT_ANY : PRINT_JSON, "retries",
		   ", %llu retries", r->retries);
	print_string(PRINT_JSON, "mode", NULL, o->raw ? "raw" : "udp");
	print_uint(PRINT_JSON, "so_priority", NULL, o->so_priority);
	if (r->moved_at < 0)
		print_null(PRINT_JSON, "moved_at", NULL);
	else if (o->move_to)
		print_int(PRINT_ANY, "moved_at",
			  ", moved cgroup after %lld frames", r->moved_at);
	else
		print_int(PRINT_ANY, "moved_at",
			  ", SO_PRIORITY changed after %lld frames",
			  r->moved_at);
	print_text("\n");
	delete_json_obj();
}

int main(int argc, char **argv)
{
	struct opts o = {
		.cli = { .shortopts = ":m:I:p:c:r:s:f:g:M:P:E:jh",
			 .longopts = longopts, .operands = "DEST",
			 .usage = usage, .set = set_option, .ctx = &o },
		.port = DEFAULT_PORT, .count = 1000, .size = 64,
		.ethertype = DEFAULT_ETHERTYPE,
	};
	struct result r = { 0 };
	int fd, err;

	progname = "priosend";
	err = parse_options(argc, argv, &o.cli);
	if (!err)
		err = check_args(&o, argv);
	if (err)
		return err;
	/* Before the socket: net_prio tags a socket when it is created. */
	if (o.cgroup && join_cgroup(o.cgroup))
		return EXIT_FAILURE;
	fd = open_socket(&o);
	if (fd < 0)
		return EXIT_FAILURE;
	err = send_frames(fd, &o, &r);
	close(fd);
	if (err)
		return err;
	print_result(&o, &r);
	return 0;
}
