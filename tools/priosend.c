// SPDX-License-Identifier: GPL-2.0
/*
 * priosend - send numbered UDP or raw Ethernet frames from a chosen cgroup.
 *
 * The lab's sender: it joins a cgroup before opening its socket (so
 * net_prio tags the socket with that cgroup's prioidx), can set
 * SO_PRIORITY, and can move itself to another cgroup mid-stream while the
 * socket stays open.  Every frame carries the payload of payload.h.
 */
#include "parse.h"
#include "payload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAYLOAD 1472	/* IPv4/UDP in a 1500-byte MTU */
#define MAX_COUNT 1000000000ull
#define MAX_RATE 100000000ull
#define NSEC 1000000000ull

enum { OPT_MOVE_AFTER = 256 };

struct opts {
	int raw;
	const char *dest;
	const char *ifname;
	uint64_t port, count, rate, size, flow, ethertype;
	const char *cgroup, *move_to;
	uint64_t move_after;
	int move_after_set;
	uint64_t so_priority;
	int so_priority_set;
	int json;
	/* DEST, resolved by parse_args() */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	uint8_t mac[6];
};

struct result {
	uint64_t sent, errors, retries;
	long long moved_at;	/* frames sent before the move, -1: none */
	double elapsed;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: priosend [OPTIONS] DEST\n"
"Send numbered frames (flow id + sequence number in each payload).\n"
"  DEST                    udp: IPv4/IPv6 address; raw: MAC aa:bb:cc:dd:ee:ff\n"
"  -m, --mode udp|raw      default udp\n"
"  -I, --interface IFACE   raw: interface to send on (required);\n"
"                          udp: SO_BINDTODEVICE to it\n"
"  -p, --port N            udp destination port, 1..65535 (default %d)\n"
"  -c, --count N           frames to send, 1..%llu (default 1000)\n"
"  -r, --rate PPS          frames per second, 0 = as fast as possible "
"(default 0)\n"
"  -s, --size N            payload bytes, %d..%d (default 64)\n"
"  -f, --flow ID           flow id in the payload, 0..4294967295 (default 1)\n"
"  -g, --cgroup PATH       join cgroup directory PATH before opening the "
"socket\n"
"  -M, --move-to PATH      move to cgroup PATH mid-stream, socket kept open\n"
"      --move-after N      frames sent before the move (default count/2)\n"
"  -P, --so-priority N     setsockopt SO_PRIORITY N, 0..4294967295\n"
"  -E, --ethertype N       raw mode ethertype (default 0x%04x)\n"
"  -j, --json              print one JSON object at the end\n"
"  -h, --help              this text\n"
"Exit 0 when all frames were sent, 1 on runtime errors, 2 on usage errors.\n",
		DEFAULT_PORT, MAX_COUNT, PAYLOAD_LEN, MAX_PAYLOAD,
		DEFAULT_ETHERTYPE);
}

static int join_cgroup(const char *path)
{
	char file[4096], pid[32];
	int fd, len, err = 0;

	if (snprintf(file, sizeof(file), "%s/cgroup.procs", path) >=
	    (int)sizeof(file)) {
		err = ENAMETOOLONG;
		goto out;
	}
	len = snprintf(pid, sizeof(pid), "%d\n", getpid());
	fd = open(file, O_WRONLY);
	if (fd < 0) {
		err = errno;
		goto out;
	}
	if (write(fd, pid, len) != len)
		err = errno ? errno : EIO;
	close(fd);
out:
	if (err)
		fprintf(stderr, "priosend: cannot join cgroup %s: %s\n", path,
			strerror(err));
	return err ? -1 : 0;
}

static int parse_dest(struct opts *o)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&o->addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&o->addr;

	if (o->raw)
		return parse_mac("DEST", o->dest, o->mac);
	memset(&o->addr, 0, sizeof(o->addr));
	if (inet_pton(AF_INET, o->dest, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)o->port);
		o->addrlen = sizeof(*in4);
	} else if (inet_pton(AF_INET6, o->dest, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)o->port);
		o->addrlen = sizeof(*in6);
	} else {
		fprintf(stderr, "priosend: DEST '%s' is not an IPv4 or IPv6 "
			"address (udp mode; raw mode takes a MAC)\n", o->dest);
		return -1;
	}
	return 0;
}

static int once(const char *opt, const char **slot, const char *value)
{
	if (*slot) {
		fprintf(stderr, "%s: given twice ('%s', '%s')\n", opt, *slot,
			value);
		return -1;
	}
	*slot = value;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "interface", required_argument, NULL, 'I' },
		{ "port", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "flow", required_argument, NULL, 'f' },
		{ "cgroup", required_argument, NULL, 'g' },
		{ "move-to", required_argument, NULL, 'M' },
		{ "move-after", required_argument, NULL, OPT_MOVE_AFTER },
		{ "so-priority", required_argument, NULL, 'P' },
		{ "ethertype", required_argument, NULL, 'E' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, bad;

	while ((c = getopt_long(argc, argv, "m:I:p:c:r:s:f:g:M:P:E:jh", lo,
				NULL)) != -1) {
		switch (c) {
		case 'm':
			bad = 0;
			if (!strcmp(optarg, "raw")) {
				o->raw = 1;
			} else if (!strcmp(optarg, "udp")) {
				o->raw = 0;
			} else {
				fprintf(stderr, "--mode: '%s' is not udp or "
					"raw\n", optarg);
				bad = -1;
			}
			break;
		case 'I':
			bad = once("--interface", &o->ifname, optarg);
			break;
		case 'p':
			bad = parse_u64("--port", optarg, 1, 65535, &o->port);
			break;
		case 'c':
			bad = parse_u64("--count", optarg, 1, MAX_COUNT,
					&o->count);
			break;
		case 'r':
			bad = parse_u64("--rate", optarg, 0, MAX_RATE, &o->rate);
			break;
		case 's':
			bad = parse_u64("--size", optarg, PAYLOAD_LEN,
					MAX_PAYLOAD, &o->size);
			break;
		case 'f':
			bad = parse_u64("--flow", optarg, 0, UINT32_MAX,
					&o->flow);
			break;
		case 'g':
			bad = once("--cgroup", &o->cgroup, optarg);
			break;
		case 'M':
			bad = once("--move-to", &o->move_to, optarg);
			break;
		case OPT_MOVE_AFTER:
			bad = parse_u64("--move-after", optarg, 0, MAX_COUNT,
					&o->move_after);
			o->move_after_set = 1;
			break;
		case 'P':
			bad = parse_u64("--so-priority", optarg, 0, UINT32_MAX,
					&o->so_priority);
			o->so_priority_set = 1;
			break;
		case 'E':
			/* below 0x600 the field is an 802.3 length */
			bad = parse_u64("--ethertype", optarg, 0x600, 0xffff,
					&o->ethertype);
			break;
		case 'j':
			bad = 0;
			o->json = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:	/* getopt_long said what was wrong */
			bad = -1;
		}
		if (bad)
			return -1;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "priosend: need exactly one DEST, got %d\n",
			argc - optind);
		return -1;
	}
	o->dest = argv[optind];
	if (parse_dest(o) < 0)
		return -1;
	if (o->raw && !o->ifname) {
		fprintf(stderr, "priosend: raw mode needs --interface IFACE\n");
		return -1;
	}
	if (o->move_after_set && !o->move_to) {
		fprintf(stderr, "priosend: --move-after needs --move-to\n");
		return -1;
	}
	if (!o->move_after_set)
		o->move_after = o->count / 2;
	if (o->move_to && o->move_after >= o->count) {
		fprintf(stderr, "priosend: --move-after %llu: must be below "
			"--count %llu, or the move would never happen\n",
			(unsigned long long)o->move_after,
			(unsigned long long)o->count);
		return -1;
	}
	return 0;
}

/* The socket frames go out on, connected in udp mode; -1 on error. */
static int open_socket(const struct opts *o, struct sockaddr_ll *sll)
{
	int fd;

	if (o->raw) {
		memset(sll, 0, sizeof(*sll));
		sll->sll_family = AF_PACKET;
		sll->sll_protocol = htons((uint16_t)o->ethertype);
		sll->sll_ifindex = (int)if_nametoindex(o->ifname);
		sll->sll_halen = 6;
		memcpy(sll->sll_addr, o->mac, 6);
		if (!sll->sll_ifindex) {
			fprintf(stderr, "priosend: interface %s: %s\n",
				o->ifname, strerror(errno));
			return -1;
		}
		/* SOCK_DGRAM: the device builds the link header, so a VLAN
		 * device adds its tag (and maps the priority to a PCP). */
		fd = socket(AF_PACKET, SOCK_DGRAM, 0);
		if (fd < 0)
			fprintf(stderr, "priosend: packet socket for %s: %s\n",
				o->ifname, strerror(errno));
		return fd;
	}

	int family = o->addr.ss_family, pmtu;

	fd = socket(family, SOCK_DGRAM, 0);
	if (fd < 0) {
		fprintf(stderr, "priosend: udp socket: %s\n", strerror(errno));
		return -1;
	}
	if (o->ifname && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, o->ifname,
				    (socklen_t)strlen(o->ifname)) < 0) {
		fprintf(stderr, "priosend: bind to interface %s: %s\n",
			o->ifname, strerror(errno));
		goto fail;
	}
	/* Never fragment: priosink counts whole datagrams only, so a size
	 * over the path MTU must fail loudly (EMSGSIZE), not go missing. */
	pmtu = family == AF_INET ? IP_PMTUDISC_DO : IPV6_PMTUDISC_DO;
	if (setsockopt(fd, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       family == AF_INET ? IP_MTU_DISCOVER : IPV6_MTU_DISCOVER,
		       &pmtu, sizeof(pmtu)) < 0) {
		fprintf(stderr, "priosend: path MTU discovery: %s\n",
			strerror(errno));
		goto fail;
	}
	if (connect(fd, (struct sockaddr *)&o->addr, o->addrlen) < 0) {
		fprintf(stderr, "priosend: connect to %s port %llu: %s\n",
			o->dest, (unsigned long long)o->port, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / NSEC),
			       .tv_nsec = (long)(ns % NSEC) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

/* 0 when all o->count frames went out; -1 on a hard error (printed). */
static int send_all(const struct opts *o, int fd, const struct sockaddr_ll *sll,
		    struct result *r)
{
	static uint8_t buf[MAX_PAYLOAD];
	const struct timespec backoff = { .tv_nsec = 20000 };
	uint64_t start = now_ns();

	r->moved_at = -1;
	while (r->sent < o->count) {
		struct payload p = { .flow = (uint32_t)o->flow, .seq = r->sent,
				     .so_priority = (uint32_t)o->so_priority };
		ssize_t n;

		if (o->move_to && r->sent == o->move_after && r->moved_at < 0) {
			if (join_cgroup(o->move_to) < 0)
				return -1;
			r->moved_at = (long long)r->sent;
		}
		/* Absolute deadlines from the start, so pacing does not
		 * drift with the time each send takes. */
		if (o->rate)
			sleep_until(start + r->sent * NSEC / o->rate);
		payload_put(buf, &p);
		if (o->raw)
			n = sendto(fd, buf, o->size, 0,
				   (const struct sockaddr *)sll, sizeof(*sll));
		else
			n = send(fd, buf, o->size, 0);
		if (n == (ssize_t)o->size) {
			r->sent++;
			continue;
		}
		if (n >= 0) {
			fprintf(stderr, "priosend: short send of frame %llu: "
				"%zd of %llu bytes\n",
				(unsigned long long)r->sent, n,
				(unsigned long long)o->size);
			return -1;
		}
		switch (errno) {
		case ENOBUFS:
		case EAGAIN:
			/* a full queue: wait and send the same frame again */
			r->retries++;
			nanosleep(&backoff, NULL);
			break;
		case EINTR:
			break;
		case ECONNREFUSED:
		case EHOSTUNREACH:
		case ENETUNREACH:
			/* An ICMP error for an earlier frame (nothing listens
			 * on a sink's port): this frame was not sent, the
			 * error is cleared, send it again. */
			r->errors++;
			break;
		case EMSGSIZE:
			fprintf(stderr, "priosend: --size %llu does not fit "
				"the path MTU to %s: use a smaller --size\n",
				(unsigned long long)o->size, o->dest);
			return -1;
		default:
			fprintf(stderr, "priosend: send of frame %llu to %s: "
				"%s\n", (unsigned long long)r->sent, o->dest,
				strerror(errno));
			return -1;
		}
	}
	r->elapsed = (double)(now_ns() - start) / NSEC;
	return 0;
}

static void print_result(const struct opts *o, const struct result *r)
{
	double pps = r->elapsed > 0 ? (double)r->sent / r->elapsed : 0;

	if (!o->json) {
		printf("priosend: %llu frames of flow %llu (%s, %llu bytes) in "
		       "%.3f s, %.0f pps, %llu retries, %llu errors\n",
		       (unsigned long long)r->sent,
		       (unsigned long long)o->flow, o->raw ? "raw" : "udp",
		       (unsigned long long)o->size, r->elapsed, pps,
		       (unsigned long long)r->retries,
		       (unsigned long long)r->errors);
		return;
	}
	printf("{\"sent\":%llu,\"errors\":%llu,\"retries\":%llu,"
	       "\"elapsed_s\":%.6f,\"pps\":%.1f,\"flow\":%llu,"
	       "\"mode\":\"%s\",\"so_priority\":%llu,\"moved_at\":",
	       (unsigned long long)r->sent, (unsigned long long)r->errors,
	       (unsigned long long)r->retries, r->elapsed, pps,
	       (unsigned long long)o->flow, o->raw ? "raw" : "udp",
	       (unsigned long long)o->so_priority);
	if (r->moved_at < 0)
		printf("null}\n");
	else
		printf("%lld}\n", r->moved_at);
}

int main(int argc, char **argv)
{
	struct opts o = { .port = DEFAULT_PORT, .count = 1000, .size = 64,
			  .flow = 1, .ethertype = DEFAULT_ETHERTYPE };
	struct sockaddr_ll sll;
	struct result r = { 0 };
	int fd;

	if (parse_args(argc, argv, &o) < 0) {
		fprintf(stderr, "try priosend -h\n");
		return 2;
	}
	/* net_prio and net_cls stamp a socket with the cgroup its creator
	 * is in at socket() time: join first. */
	if (o.cgroup && join_cgroup(o.cgroup) < 0)
		return 1;
	fd = open_socket(&o, &sll);
	if (fd < 0)
		return 1;
	if (o.so_priority_set) {
		/* the kernel reads an int and keeps its bits as a u32 */
		int prio = (int)(uint32_t)o.so_priority;

		if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio,
			       sizeof(prio)) < 0) {
			fprintf(stderr, "priosend: SO_PRIORITY %llu: %s\n",
				(unsigned long long)o.so_priority,
				strerror(errno));
			return 1;
		}
	}
	if (send_all(&o, fd, &sll, &r) < 0)
		return 1;
	close(fd);
	print_result(&o, &r);
	return 0;
}
