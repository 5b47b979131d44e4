// SPDX-License-Identifier: GPL-2.0
/*
 * prioping - ICMP echo probes sent with a socket priority (SO_PRIORITY),
 * each probe's round-trip time kept.
 *
 * Neither busybox ping nor iputils ping sets SO_PRIORITY (iputils' -Q sets
 * IP_TOS, whose priority can only be 0, 2, 4 or 6), and a probe of one
 * traffic class is what shows that a strict class keeps its latency while
 * a best-effort one waits behind a queue.  The echo request leaves with
 * the priority (a VLAN device maps it to the PCP); the reply is whatever
 * the peer's kernel sends.
 *
 *   prioping [-c N] [-i SEC] [-P PRIO] [-s BYTES] [-W SEC] [-j] DEST
 *
 * Probes go out every SEC seconds whether or not earlier ones were
 * answered; a probe with no reply within -W seconds of the last send is
 * lost.  Text: a line per probe as its reply arrives (or as it is given
 * up), then a summary; -j: one object with each probe's send time (s from
 * the first) and RTT in ms (null when lost).
 *
 * Exit 0 when every probe was answered, 1 when some were lost (a probe
 * the stack refused to send is lost; the first reason goes to stderr) or
 * the raw socket could not be opened, 2 on usage errors.
 */
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_COUNT 100000
#define MAX_SIZE 1472

struct opts {
	uint64_t count, prio, size;
	bool prio_set;
	double interval, wait;
	struct sockaddr_in dest;
};

struct probe {
	double sent;		/* seconds since the first send */
	double rtt_ms;		/* < 0: no reply (yet) */
};

static void usage(void)
{
	printf(
"usage: prioping [OPTIONS] DEST\n"
"ICMP echo probes to IPv4 DEST with a socket priority; each probe's RTT.\n"
"  -c, --count N           probes to send (default 10)\n"
"  -i, --interval SEC      seconds between probes (default 0.1)\n"
"  -P, --so-priority N     SO_PRIORITY of the probes (default: none, 0)\n"
"  -s, --size N            ICMP payload bytes, 16..%d (default 56)\n"
"  -W, --wait SEC          give a probe up SEC s after the last send\n"
"                          (default 2)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"Exit 0 when every probe was answered, 1 when one was lost, 2 usage.\n",
	       MAX_SIZE);
}

static const struct option longopts[] = {
	OPTION_ARG("count", 'c'), OPTION_ARG("interval", 'i'),
	OPTION_ARG("so-priority", 'P'), OPTION_ARG("size", 's'),
	OPTION_ARG("wait", 'W'),
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'c':
		return parse_u64("--count", arg, 1, MAX_COUNT, &o->count);
	case 'i':
		return parse_seconds("--interval", arg, 60, &o->interval);
	case 'P':
		o->prio_set = true;
		return parse_u64("--so-priority", arg, 0, UINT32_MAX, &o->prio);
	case 's':
		return parse_u64("--size", arg, 16, MAX_SIZE, &o->size);
	case 'W':
		return parse_seconds("--wait", arg, 60, &o->wait);
	}
	return 0;
}

static uint16_t checksum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t sum = 0;

	for (; len > 1; p += 2, len -= 2)
		sum += (uint32_t)p[0] << 8 | p[1];
	if (len)
		sum += (uint32_t)p[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

static int open_socket(const struct opts *o)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);

	if (fd < 0) {
		runtime_error("raw ICMP socket: %s", strerror(errno));
		return -1;
	}
	if (o->prio_set) {
		int prio = (int)(uint32_t)o->prio;

		if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio,
			       sizeof(prio)) < 0) {
			runtime_error("SO_PRIORITY %llu: %s",
				      (unsigned long long)o->prio,
				      strerror(errno));
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* 0, or -1 with errno set: the caller counts the probe lost. */
static int send_probe(int fd, const struct opts *o, uint16_t id,
		      uint16_t seq)
{
	uint8_t buf[sizeof(struct icmphdr) + MAX_SIZE] = { 0 };
	struct icmphdr *h = (void *)buf;
	size_t len = sizeof(*h) + o->size;

	h->type = ICMP_ECHO;
	h->un.echo.id = htons(id);
	h->un.echo.sequence = htons(seq);
	h->checksum = checksum(buf, len);
	return sendto(fd, buf, len, 0, (const void *)&o->dest,
		      sizeof(o->dest)) < 0 ? -1 : 0;
}

/* A reply's sequence number, or -1 if it is not one of ours. */
static long read_reply(int fd, uint16_t id)
{
	uint8_t buf[2048];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	const struct iphdr *ip = (const void *)buf;
	const struct icmphdr *h;
	size_t ihl;

	if (n < (ssize_t)sizeof(*ip))
		return -1;
	ihl = (size_t)ip->ihl * 4;
	if ((size_t)n < ihl + sizeof(*h))
		return -1;
	h = (const void *)(buf + ihl);
	if (h->type != ICMP_ECHOREPLY || ntohs(h->un.echo.id) != id)
		return -1;
	return ntohs(h->un.echo.sequence);
}

/* Text mode, before the summary (print_text() needs new_json_obj()). */
static void print_probe(const struct probe *p, uint64_t seq)
{
	if (p->rtt_ms >= 0)
		printf("seq %llu at %.3f s: rtt %.3f ms\n",
			   (unsigned long long)seq, p->sent, p->rtt_ms);
	else
		printf("seq %llu at %.3f s: lost\n",
			   (unsigned long long)seq, p->sent);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void print_result(const struct opts *o, const struct probe *pr,
			 bool json)
{
	uint64_t got = 0;
	double *rtts = calloc(o->count, sizeof(*rtts));

	for (uint64_t i = 0; i < o->count; i++)
		if (pr[i].rtt_ms >= 0 && rtts)
			rtts[got++] = pr[i].rtt_ms;
	new_json_obj(stdout, json);
	print_string(PRINT_ANY, "dest", "%s:", inet_ntoa(o->dest.sin_addr));
	print_uint(PRINT_ANY, "priority", " priority %llu,",
		   o->prio_set ? o->prio : 0);
	print_uint(PRINT_ANY, "sent", " %llu sent,", o->count);
	print_uint(PRINT_ANY, "received", " %llu received", got);
	print_uint(PRINT_JSON, "lost", NULL, o->count - got);
	if (got && rtts) {
		qsort(rtts, got, sizeof(*rtts), cmp_double);
		print_float(PRINT_ANY, "min_ms", ", rtt min %.3f", rtts[0]);
		print_float(PRINT_ANY, "median_ms", " median %.3f",
			    rtts[got / 2]);
		print_float(PRINT_ANY, "max_ms", " max %.3f ms",
			    rtts[got - 1]);
	}
	print_text("\n");
	open_json_array("probes");
	for (uint64_t i = 0; i < o->count && json; i++) {
		open_json_object(NULL);
		print_float(PRINT_JSON, "t_s", NULL, pr[i].sent);
		if (pr[i].rtt_ms >= 0)
			print_float(PRINT_JSON, "rtt_ms", NULL, pr[i].rtt_ms);
		else
			print_null(PRINT_JSON, "rtt_ms", NULL);
		close_json_object();
	}
	close_json_array();
	delete_json_obj();
	free(rtts);
}

static int run(const struct opts *o, struct probe *pr, bool json)
{
	uint16_t id = (uint16_t)getpid();
	uint64_t next = 0, answered = 0;
	double t0 = now(), last_send = t0;
	int fd = open_socket(o), send_errno = 0;

	if (fd < 0)
		return EXIT_FAILURE;
	for (;;) {
		double t = now(), until;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long seq;

		if (next < o->count && t >= t0 + (double)next * o->interval) {
			pr[next].sent = t - t0;
			/* A probe the stack refuses (no route, neighbour
			 * failed, no buffer) is lost like one dropped on the
			 * way; the first reason is told at the end. */
			if (send_probe(fd, o, id, (uint16_t)next) < 0 &&
			    !send_errno)
				send_errno = errno;
			last_send = t;
			next++;
			continue;
		}
		if (next == o->count &&
		    (answered == o->count || t >= last_send + o->wait))
			break;
		until = next < o->count ? t0 + (double)next * o->interval
					: last_send + o->wait;
		if (poll(&pfd, 1, (int)((until - t) * 1000) + 1) <= 0)
			continue;
		seq = read_reply(fd, id);
		/* seq is 16 bits on the wire: probe i is the last with i's low
		 * bits sent so far. */
		if (seq < 0 || next == 0)
			continue;
		for (uint64_t i = next; i-- > 0;) {
			if ((i & 0xffff) != (uint64_t)seq)
				continue;
			if (pr[i].rtt_ms < 0) {
				pr[i].rtt_ms = (now() - t0 - pr[i].sent) * 1e3;
				answered++;
				if (!json)
					print_probe(&pr[i], i);
			}
			break;
		}
	}
	close(fd);
	for (uint64_t i = 0; i < o->count && !json; i++)
		if (pr[i].rtt_ms < 0)
			print_probe(&pr[i], i);
	if (send_errno)
		runtime_error("some probes were not sent: %s",
			      strerror(send_errno));
	print_result(o, pr, json);
	return answered == o->count ? 0 : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	struct opts o = { .count = 10, .size = 56, .interval = 0.1,
			  .wait = 2.0 };
	struct cli cli = {
		.shortopts = ":c:i:P:s:W:jh", .longopts = longopts,
		.operands = "DEST", .usage = usage, .set = set_option,
		.ctx = &o,
	};
	struct probe *pr;
	int rc;

	progname = "prioping";
	rc = parse_options(argc, argv, &cli);
	if (rc)
		return rc;
	o.dest.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[optind], &o.dest.sin_addr) != 1)
		return usage_error("DEST '%s' is not an IPv4 address",
				   argv[optind]);
	pr = calloc(o.count, sizeof(*pr));
	if (!pr)
		return runtime_error("out of memory");
	for (uint64_t i = 0; i < o.count; i++)
		pr[i].rtt_ms = -1;
	rc = run(&o, pr, cli.json);
	free(pr);
	return rc;
}
