// SPDX-License-Identifier: GPL-2.0
/*
 * priosink - count priosend's frames on an interface per flow and PCP.
 *
 * The lab's receiver.  It reads every frame of an interface with an
 * AF_PACKET socket and PACKET_AUXDATA: the kernel strips the 802.1Q tag on
 * receive and hands VID and PCP over in tpacket_auxdata, so the PCP the
 * frame had on the wire is read even though the frame data lacks the tag.
 * Sequence numbers give loss, duplicates and reordering per flow.
 */
#include "frame.h"
#include "parse.h"
#include "payload.h"
#include "seqtrack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT 1000000000000ull
#define MAX_SECONDS 1e6
/* Frames of flows beyond this many are counted as "other": a stray
 * sender must not make the sink eat the guest's memory. */
#define MAX_FLOWS 4096
#define RCVBUF (8 << 20)

enum { OPT_IDLE = 256 };

/* Counts per key (a VID or an SO_PRIORITY), kept sorted by key. */
struct tally {
	struct tally_entry {
		uint32_t key;
		uint64_t n;
	} *e;
	size_t len, cap;
};

struct flow {
	uint32_t id;
	struct seqtrack seq;
	uint64_t pcp[FRAME_UNTAGGED + 1];
	struct tally vid, prio;
};

struct sink {
	const char *ifname;
	struct frame_match match;
	uint64_t count;
	double timeout, idle;
	const char *ready;
	int json;

	struct flow *flows;	/* sorted by id */
	size_t nflows, cap;
	uint64_t frames, other, drops;
	double elapsed;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: priosink [OPTIONS] -i IFACE\n"
"Count priosend frames per flow and 802.1p PCP (from PACKET_AUXDATA).\n"
"  -i, --interface IFACE   interface to read (required)\n"
"  -c, --count N           stop after N matching frames, 0 = no limit "
"(default 0)\n"
"  -t, --timeout SEC       stop after SEC seconds, e.g. 2.5 (default 10)\n"
"      --idle SEC          stop SEC seconds after the last matching frame,\n"
"                          once one arrived; 0 = off (default 0)\n"
"  -p, --port N            udp destination port to match (default %d)\n"
"  -E, --ethertype N       raw ethertype to match (default 0x%04x)\n"
"  -R, --ready-file PATH   create PATH (empty) once the socket is bound\n"
"  -j, --json              print one JSON object at the end\n"
"  -h, --help              this text\n"
"SIGINT and SIGTERM stop it; the result is printed all the same.\n"
"Exit 0 when it ran (even if nothing arrived), 1 on runtime errors,\n"
"2 on usage errors.\n", DEFAULT_PORT, DEFAULT_ETHERTYPE);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *grow(void *p, size_t *cap, size_t size)
{
	size_t n = *cap ? *cap * 2 : 8;

	p = realloc(p, n * size);
	if (p)
		*cap = n;
	return p;
}

static int tally_add(struct tally *t, uint32_t key)
{
	size_t lo = 0, hi = t->len;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->e[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < t->len && t->e[lo].key == key) {
		t->e[lo].n++;
		return 0;
	}
	if (t->len == t->cap) {
		struct tally_entry *e = grow(t->e, &t->cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		t->e = e;
	}
	memmove(&t->e[lo + 1], &t->e[lo], (t->len - lo) * sizeof(*t->e));
	t->e[lo] = (struct tally_entry){ .key = key, .n = 1 };
	t->len++;
	return 0;
}

/* The flow with id, created if new; NULL (errno set) if it cannot be. */
static struct flow *flow_get(struct sink *s, uint32_t id)
{
	size_t lo = 0, hi = s->nflows;
	struct flow *f;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->flows[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nflows && s->flows[lo].id == id)
		return &s->flows[lo];
	if (s->nflows == MAX_FLOWS) {
		errno = ERANGE;
		return NULL;
	}
	if (s->nflows == s->cap) {
		f = grow(s->flows, &s->cap, sizeof(*f));
		if (!f) {
			errno = ENOMEM;
			return NULL;
		}
		s->flows = f;
	}
	f = &s->flows[lo];
	memmove(f + 1, f, (s->nflows - lo) * sizeof(*f));
	memset(f, 0, sizeof(*f));
	f->id = id;
	seqtrack_init(&f->seq);
	s->nflows++;
	return f;
}

/* 0 counted, 1 not ours (other), -ENOMEM. */
static int count_frame(struct sink *s, const struct frame_info *fi)
{
	struct flow *f = flow_get(s, fi->payload.flow);
	int err;

	if (!f)
		return errno == ERANGE ? 1 : -ENOMEM;
	err = seqtrack_add(&f->seq, fi->payload.seq);
	if (err == -ERANGE)
		return 1;
	if (err < 0)
		return err;
	if ((fi->vid >= 0 && tally_add(&f->vid, (uint32_t)fi->vid) < 0) ||
	    tally_add(&f->prio, fi->payload.so_priority) < 0)
		return -ENOMEM;
	f->pcp[fi->pcp]++;
	s->frames++;
	return 0;
}

/* The TCI the kernel took off the frame, or -1. */
static int aux_tci(struct msghdr *msg)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR(msg, cm)) {
		struct tpacket_auxdata aux;

		if (cm->cmsg_level != SOL_PACKET ||
		    cm->cmsg_type != PACKET_AUXDATA ||
		    cm->cmsg_len < CMSG_LEN(sizeof(aux)))
			continue;
		memcpy(&aux, CMSG_DATA(cm), sizeof(aux));
		/* TCI 0 (priority 0, VID 0) is a tag too, flagged by
		 * VLAN_VALID alone; old kernels set no flag but a TCI. */
		if ((aux.tp_status & TP_STATUS_VLAN_VALID) || aux.tp_vlan_tci)
			return aux.tp_vlan_tci;
	}
	return -1;
}

static int open_socket(struct sink *s)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(ETH_P_ALL) };
	int fd, one = 1, rcvbuf = RCVBUF;

	sll.sll_ifindex = (int)if_nametoindex(s->ifname);
	if (!sll.sll_ifindex) {
		fprintf(stderr, "priosink: interface %s: %s\n", s->ifname,
			strerror(errno));
		return -1;
	}
	/* Protocol 0 receives nothing until bind(): no frames of other
	 * interfaces slip in between socket() and bind(). */
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		fprintf(stderr, "priosink: packet socket: %s\n",
			strerror(errno));
		return -1;
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) {
		fprintf(stderr, "priosink: PACKET_AUXDATA: %s\n",
			strerror(errno));
		goto fail;
	}
	/* FORCE passes rmem_max; without CAP_NET_ADMIN it is capped. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		fprintf(stderr, "priosink: bind to %s: %s\n", s->ifname,
			strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

static int make_ready_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0) {
		fprintf(stderr, "priosink: ready file %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* Receive until count, timeout, idle or a signal; -1 on an error. */
static int receive(struct sink *s, int fd)
{
	static uint8_t buf[65536];
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
	} cbuf;
	double t0 = now(), t = t0, last = 0;

	while (!stop && (!s->count || s->frames < s->count)) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct sockaddr_ll from;
		struct msghdr msg = { .msg_name = &from,
				      .msg_namelen = sizeof(from),
				      .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf.b,
				      .msg_controllen = sizeof(cbuf.b) };
		struct frame_info fi;
		ssize_t n;
		int err;

		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			double wait = s->timeout - (t - t0);

			if (s->idle > 0 && s->frames &&
			    s->idle - (t - last) < wait)
				wait = s->idle - (t - last);
			if (wait <= 0)
				break;
			/* a signal ends poll() with EINTR, and so the loop */
			poll(&pfd, 1, (int)(wait * 1000) + 1);
			t = now();
			continue;
		}
		if (n < 0) {
			fprintf(stderr, "priosink: receive on %s: %s\n",
				s->ifname, strerror(errno));
			return -1;
		}
		t = now();
		if (t - t0 >= s->timeout)
			break;
		/* our own host's transmissions, seen on the way out */
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (frame_parse(buf, (size_t)n, aux_tci(&msg), &s->match,
				&fi) < 0) {
			s->other++;
			continue;
		}
		err = count_frame(s, &fi);
		if (err < 0) {
			fprintf(stderr, "priosink: out of memory counting "
				"flow %u\n", fi.payload.flow);
			return -1;
		}
		if (err)
			s->other++;
		else
			last = t;
	}
	s->elapsed = now() - t0;
	return 0;
}

static void print_json_string(const char *str)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void print_tally(const char *name, const struct tally *t)
{
	printf(",\"%s\":{", name);
	for (size_t i = 0; i < t->len; i++)
		printf("%s\"%u\":%llu", i ? "," : "", t->e[i].key,
		       (unsigned long long)t->e[i].n);
	printf("}");
}

static void print_json(const struct sink *s)
{
	printf("{\"interface\":");
	print_json_string(s->ifname);
	printf(",\"frames\":%llu,\"other\":%llu,\"socket_drops\":%llu,"
	       "\"elapsed_s\":%.6f,\"flows\":[",
	       (unsigned long long)s->frames, (unsigned long long)s->other,
	       (unsigned long long)s->drops, s->elapsed);
	for (size_t i = 0; i < s->nflows; i++) {
		const struct flow *f = &s->flows[i];
		const char *sep = "";

		printf("%s{\"flow\":%u,\"received\":%llu,\"lost\":%llu,"
		       "\"duplicates\":%llu,\"reordered\":%llu,"
		       "\"max_seq\":%llu,\"pcp\":{", i ? "," : "", f->id,
		       (unsigned long long)f->seq.received,
		       (unsigned long long)seqtrack_lost(&f->seq),
		       (unsigned long long)f->seq.duplicates,
		       (unsigned long long)f->seq.reordered,
		       (unsigned long long)f->seq.max_seq);
		for (int p = 0; p <= FRAME_UNTAGGED; p++) {
			if (!f->pcp[p])
				continue;
			if (p == FRAME_UNTAGGED)
				printf("%s\"untagged\":", sep);
			else
				printf("%s\"%d\":", sep, p);
			printf("%llu", (unsigned long long)f->pcp[p]);
			sep = ",";
		}
		printf("}");
		print_tally("vid", &f->vid);
		print_tally("so_priority", &f->prio);
		printf("}");
	}
	printf("]}\n");
}

static void print_table(const struct sink *s)
{
	printf("priosink on %s: %llu frames in %.3f s, %llu other, "
	       "%llu socket drops\n", s->ifname,
	       (unsigned long long)s->frames, s->elapsed,
	       (unsigned long long)s->other, (unsigned long long)s->drops);
	if (!s->nflows)
		return;
	printf("%10s %10s %8s %6s %9s  %s\n", "flow", "received", "lost",
	       "dup", "reordered", "per pcp / vid / so_priority");
	for (size_t i = 0; i < s->nflows; i++) {
		const struct flow *f = &s->flows[i];

		printf("%10u %10llu %8llu %6llu %9llu ", f->id,
		       (unsigned long long)f->seq.received,
		       (unsigned long long)seqtrack_lost(&f->seq),
		       (unsigned long long)f->seq.duplicates,
		       (unsigned long long)f->seq.reordered);
		for (int p = 0; p <= FRAME_UNTAGGED; p++) {
			if (!f->pcp[p])
				continue;
			if (p == FRAME_UNTAGGED)
				printf(" untagged=");
			else
				printf(" pcp%d=", p);
			printf("%llu", (unsigned long long)f->pcp[p]);
		}
		for (size_t v = 0; v < f->vid.len; v++)
			printf(" vid%u=%llu", f->vid.e[v].key,
			       (unsigned long long)f->vid.e[v].n);
		for (size_t v = 0; v < f->prio.len; v++)
			printf(" prio%u=%llu", f->prio.e[v].key,
			       (unsigned long long)f->prio.e[v].n);
		printf("\n");
	}
}

static int parse_args(int argc, char **argv, struct sink *s)
{
	static const struct option lo[] = {
		{ "interface", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "idle", required_argument, NULL, OPT_IDLE },
		{ "port", required_argument, NULL, 'p' },
		{ "ethertype", required_argument, NULL, 'E' },
		{ "ready-file", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c, bad;

	while ((c = getopt_long(argc, argv, "i:c:t:p:E:R:jh", lo, NULL)) != -1) {
		bad = 0;
		switch (c) {
		case 'i':
			s->ifname = optarg;
			break;
		case 'c':
			bad = parse_u64("--count", optarg, 0, MAX_COUNT,
					&s->count);
			break;
		case 't':
			bad = parse_seconds("--timeout", optarg, MAX_SECONDS,
					    &s->timeout);
			break;
		case OPT_IDLE:
			bad = parse_seconds("--idle", optarg, MAX_SECONDS,
					    &s->idle);
			break;
		case 'p':
			bad = parse_u64("--port", optarg, 1, 65535, &v);
			s->match.port = (uint16_t)v;
			break;
		case 'E':
			bad = parse_u64("--ethertype", optarg, 0x600, 0xffff,
					&v);
			s->match.ethertype = (uint16_t)v;
			break;
		case 'R':
			s->ready = optarg;
			break;
		case 'j':
			s->json = 1;
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
	if (!s->ifname) {
		fprintf(stderr, "priosink: need -i IFACE\n");
		return -1;
	}
	if (optind != argc) {
		fprintf(stderr, "priosink: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sink s = { .timeout = 10,
			  .match = { .port = DEFAULT_PORT,
				     .ethertype = DEFAULT_ETHERTYPE } };
	struct sigaction sa = { .sa_handler = on_signal };
	struct tpacket_stats st;
	socklen_t len = sizeof(st);
	int fd;

	if (parse_args(argc, argv, &s) < 0) {
		fprintf(stderr, "try priosink -h\n");
		return 2;
	}
	fd = open_socket(&s);
	if (fd < 0)
		return 1;
	/* Before the ready file: a test may signal us as soon as it sees
	 * it.  No SA_RESTART, so a signal ends a blocked poll(). */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (s.ready && make_ready_file(s.ready) < 0)
		return 1;
	if (receive(&s, fd) < 0)
		return 1;
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		s.drops = st.tp_drops;
	close(fd);
	if (s.json)
		print_json(&s);
	else
		print_table(&s);
	return 0;
}
