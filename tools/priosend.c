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
#include <getopt.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAYLOAD 1472

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
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: priosend [OPTIONS] DEST\n"
"Send numbered frames (flow id + sequence number in each payload).\n"
"  DEST                    udp: IPv4/IPv6 address; raw: MAC aa:bb:cc:dd:ee:ff\n"
"  -m, --mode udp|raw      default udp\n"
"  -I, --interface IFACE   raw: interface to send on (required); udp: bind to it\n"
"  -p, --port N            udp destination port (default %d)\n"
"  -c, --count N           frames to send (default 1000)\n"
"  -r, --rate PPS          frames per second, 0 = as fast as possible (default)\n"
"  -s, --size N            payload bytes, %d..%d (default 64)\n"
"  -f, --flow ID           flow id in the payload (default 1)\n"
"  -g, --cgroup PATH       join cgroup PATH before opening the socket\n"
"  -M, --move-to PATH      move to cgroup PATH mid-stream, socket kept open\n"
"      --move-after N      frames sent before the move (default count/2)\n"
"  -P, --so-priority N     set SO_PRIORITY N on the socket\n"
"  -E, --ethertype N       raw mode ethertype (default 0x%04x)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n",
		DEFAULT_PORT, PAYLOAD_LEN, MAX_PAYLOAD, DEFAULT_ETHERTYPE);
}

static int join_cgroup(const char *path)
{
	char file[4096];
	FILE *f;

	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	f = fopen(file, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
		fprintf(stderr, "priosend: cannot join cgroup %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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
		{ "move-after", required_argument, NULL, 'A' },
		{ "so-priority", required_argument, NULL, 'P' },
		{ "ethertype", required_argument, NULL, 'E' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "m:I:p:c:r:s:f:g:M:P:E:jh", lo,
				NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'm':
			if (!strcmp(optarg, "raw")) {
				o->raw = 1;
			} else if (strcmp(optarg, "udp")) {
				fprintf(stderr, "--mode: '%s' is not udp or raw\n",
					optarg);
				bad = 1;
			}
			break;
		case 'I': o->ifname = optarg; break;
		case 'p': bad = parse_u64("--port", optarg, 1, 65535, &o->port); break;
		case 'c': bad = parse_u64("--count", optarg, 1, 1000000000, &o->count); break;
		case 'r': bad = parse_u64("--rate", optarg, 0, 100000000, &o->rate); break;
		case 's': bad = parse_u64("--size", optarg, PAYLOAD_LEN, MAX_PAYLOAD, &o->size); break;
		case 'f': bad = parse_u64("--flow", optarg, 0, UINT32_MAX, &o->flow); break;
		case 'g': o->cgroup = optarg; break;
		case 'M': o->move_to = optarg; break;
		case 'A':
			bad = parse_u64("--move-after", optarg, 0, 1000000000,
					&o->move_after);
			o->move_after_set = 1;
			break;
		case 'P':
			bad = parse_u64("--so-priority", optarg, 0, UINT32_MAX,
					&o->so_priority);
			o->so_priority_set = 1;
			break;
		case 'E': bad = parse_u64("--ethertype", optarg, 0x600, 0xffff, &o->ethertype); break;
		case 'j': o->json = 1; break;
		case 'h': usage(stdout); exit(0);
		default: bad = 1;
		}
		if (bad)
			return -1;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "priosend: need exactly one DEST\n");
		return -1;
	}
	o->dest = argv[optind];
	if (o->raw && !o->ifname) {
		fprintf(stderr, "priosend: raw mode needs --interface\n");
		return -1;
	}
	if (o->move_after_set && !o->move_to) {
		fprintf(stderr, "priosend: --move-after needs --move-to\n");
		return -1;
	}
	if (!o->move_after_set)
		o->move_after = o->count / 2;
	return 0;
}

/* A connected socket for o; -1 on error (message printed). */
static int open_socket(const struct opts *o, int *is_raw_out)
{
	int fd;

	*is_raw_out = o->raw;
	if (o->raw) {
		struct sockaddr_ll sll = { .sll_family = AF_PACKET };

		if (parse_mac("DEST", o->dest, sll.sll_addr) < 0)
			return -2;
		sll.sll_halen = 6;
		sll.sll_protocol = htons(o->ethertype);
		sll.sll_ifindex = if_nametoindex(o->ifname);
		if (!sll.sll_ifindex) {
			fprintf(stderr, "priosend: interface %s: %s\n",
				o->ifname, strerror(errno));
			return -1;
		}
		/* Packet sockets do not connect: main() sends with sendto(). */
		fd = socket(AF_PACKET, SOCK_DGRAM, htons(o->ethertype));
		if (fd < 0) {
			fprintf(stderr, "priosend: packet socket on %s: %s\n",
				o->ifname, strerror(errno));
			return -1;
		}
		return fd;
	}

	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	struct sockaddr_in *in4 = (void *)&ss;
	struct sockaddr_in6 *in6 = (void *)&ss;

	if (inet_pton(AF_INET, o->dest, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(o->port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, o->dest, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(o->port);
		len = sizeof(*in6);
	} else {
		fprintf(stderr, "priosend: DEST '%s' is not an IPv4 or IPv6 "
			"address\n", o->dest);
		return -2;
	}
	fd = socket(ss.ss_family, SOCK_DGRAM, 0);
	if (fd < 0) {
		fprintf(stderr, "priosend: socket: %s\n", strerror(errno));
		return -1;
	}
	if (o->ifname && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, o->ifname,
				    strlen(o->ifname)) < 0) {
		fprintf(stderr, "priosend: bind to %s: %s\n", o->ifname,
			strerror(errno));
		return -1;
	}
	if (connect(fd, (void *)&ss, len) < 0) {
		fprintf(stderr, "priosend: connect %s: %s\n", o->dest,
			strerror(errno));
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct opts o = { .port = DEFAULT_PORT, .count = 1000, .size = 64,
			  .flow = 1, .ethertype = DEFAULT_ETHERTYPE };
	uint8_t buf[MAX_PAYLOAD] = { 0 };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	uint64_t sent = 0, errors = 0, retries = 0;
	long long moved_at = -1;
	int fd, is_raw;
	double t0, elapsed;
	struct timespec next;

	if (parse_args(argc, argv, &o) < 0) {
		fprintf(stderr, "try priosend -h\n");
		return 2;
	}
	if (o.cgroup && join_cgroup(o.cgroup) < 0)
		return 1;
	fd = open_socket(&o, &is_raw);
	if (fd == -2) {
		fprintf(stderr, "try priosend -h\n");
		return 2;
	}
	if (fd < 0)
		return 1;
	if (is_raw) {
		parse_mac("DEST", o.dest, sll.sll_addr);
		sll.sll_halen = 6;
		sll.sll_protocol = htons(o.ethertype);
		sll.sll_ifindex = if_nametoindex(o.ifname);
	}
	if (o.so_priority_set) {
		int prio = (int)(uint32_t)o.so_priority;

		if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio,
			       sizeof(prio)) < 0) {
			fprintf(stderr, "priosend: SO_PRIORITY %llu: %s\n",
				(unsigned long long)o.so_priority,
				strerror(errno));
			return 1;
		}
	}

	t0 = now();
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (sent < o.count) {
		struct payload p = { .flow = (uint32_t)o.flow, .seq = sent,
				     .so_priority = (uint32_t)o.so_priority };
		ssize_t n;

		if (o.move_to && sent == o.move_after && moved_at < 0) {
			if (join_cgroup(o.move_to) < 0)
				return 1;
			moved_at = (long long)sent;
		}
		if (o.rate) {
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
					NULL);
			next.tv_nsec += 1000000000ll / o.rate;
			while (next.tv_nsec >= 1000000000) {
				next.tv_nsec -= 1000000000;
				next.tv_sec++;
			}
		}
		payload_put(buf, &p);
		if (is_raw)
			n = sendto(fd, buf, o.size, 0, (void *)&sll,
				   sizeof(sll));
		else
			n = send(fd, buf, o.size, 0);
		if (n < 0) {
			if (errno == ENOBUFS || errno == EAGAIN ||
			    errno == EINTR) {
				retries++;
				usleep(50);
				continue;
			}
			if (errno == ECONNREFUSED) {
				/* an ICMP unreachable from the peer: not ours */
				errors++;
				continue;
			}
			fprintf(stderr, "priosend: send: %s (after %llu)\n",
				strerror(errno), (unsigned long long)sent);
			return 1;
		}
		sent++;
	}
	elapsed = now() - t0;
	if (o.json) {
		printf("{\"sent\":%llu,\"errors\":%llu,\"retries\":%llu,"
		       "\"elapsed_s\":%.6f,\"pps\":%.1f,\"flow\":%llu,"
		       "\"mode\":\"%s\",\"so_priority\":%llu,\"moved_at\":",
		       (unsigned long long)sent, (unsigned long long)errors,
		       (unsigned long long)retries, elapsed,
		       elapsed > 0 ? sent / elapsed : 0.0,
		       (unsigned long long)o.flow, is_raw ? "raw" : "udp",
		       (unsigned long long)o.so_priority);
		if (moved_at < 0)
			printf("null}\n");
		else
			printf("%lld}\n", moved_at);
	} else {
		printf("priosend: %llu frames of flow %llu in %.3f s "
		       "(%.0f pps)\n", (unsigned long long)sent,
		       (unsigned long long)o.flow, elapsed,
		       elapsed > 0 ? sent / elapsed : 0.0);
	}
	return 0;
}
