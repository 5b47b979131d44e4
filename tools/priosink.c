// SPDX-License-Identifier: GPL-2.0
/*
 * priosink - count priosend's frames on an interface per flow and PCP.
 *
 * The lab's receiver.  It reads every frame of an interface with an
 * AF_PACKET socket and PACKET_AUXDATA: the kernel strips the 802.1Q tag on
 * receive and hands VID and PCP over in tpacket_auxdata, so the PCP the
 * frame had on the wire is read even though the frame data lacks the tag.
 * Sequence numbers give loss, duplicates and reordering per flow.
 * --interval adds a time series: per PCP, the frames and bytes received in
 * each interval, so a class's share of a link can be read over time.
 */
#include "payload.h"
#include "seqtrack.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FLOWS 64
#define MAX_KEYS 16		/* distinct VIDs, or priorities, per flow */
#define NUM_PCP 8
/* Eleven days and more; as milliseconds it still fits poll()'s int. */
#define MAX_SECONDS 1000000.0
#define MAX_INTERVAL_MS 3600000ull
/* --timeout / --interval: what the series may hold (~144 MB at most). */
#define MAX_INTERVALS 1000000.0

struct opts {
	struct cli cli;
	const char *ifname, *ready;
	uint64_t count, port, ethertype, interval_ms;
	double timeout, idle;
};

/* One interval of the series: priosend frames per PCP, tagged or not. */
struct bucket {
	uint64_t frames[8], bytes[8];
	uint64_t untagged_frames, untagged_bytes;
};

struct series {
	double len;			/* seconds per interval */
	struct bucket *b;
	size_t n;			/* intervals begun so far */
	size_t cap;
	size_t printed;			/* text mode: intervals printed */
};

/* Frames per key (a VID, a priority), keys in order of first sight. */
struct tally {
	uint32_t key[MAX_KEYS];
	uint64_t frames[MAX_KEYS];
	int len;
};

struct flow {
	uint32_t id;
	struct seqtrack seq;
	uint64_t pcp[NUM_PCP];
	uint64_t untagged;
	struct tally vid;
	struct tally prio;
};

/* One frame as read: what the wire carried and what priosend wrote. */
struct frame {
	int vid;			/* -1: no 802.1Q tag */
	int pcp;
	size_t wire_len;		/* frame length with its tag, no FCS */
	const uint8_t *payload;		/* NULL: not at our port/ethertype */
	size_t payload_len;
};

struct sink {
	int fd;
	uint64_t frames;		/* priosend frames, counted per flow */
	uint64_t other;			/* anything else the interface saw */
	struct flow flows[MAX_FLOWS];
	int nflows;
	struct series series;
	uint8_t buf[65536];
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	printf(
"usage: priosink [OPTIONS] -i IFACE\n"
"Count priosend frames per flow and 802.1p PCP (from PACKET_AUXDATA).\n"
"  -i, --interface IFACE   interface to read (required)\n"
"  -c, --count N           stop after N matching frames (0 = no limit)\n"
"  -t, --timeout SEC       stop after SEC seconds (default 10)\n"
"      --idle SEC          stop SEC seconds after the last frame (0 = off)\n"
"      --interval MS       also count frames and bytes per PCP in intervals\n"
"                          of MS ms from the start (text: a line per interval\n"
"                          as it ends; -j: \"intervals\"); bytes are the\n"
"                          frame with its 802.1Q tag, without FCS\n"
"  -p, --port N            udp port to match (default %d)\n"
"  -E, --ethertype N       raw ethertype to match (default 0x%04x)\n"
"  -R, --ready-file PATH   create PATH once the socket is bound\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n", DEFAULT_PORT, DEFAULT_ETHERTYPE);
}

/* --idle, --interval: no short form ('D', 'I' are not in shortopts). */
static const struct option longopts[] = {
	OPTION_ARG("interface", 'i'), OPTION_ARG("count", 'c'),
	OPTION_ARG("timeout", 't'), OPTION_ARG("idle", 'D'),
	OPTION_ARG("interval", 'I'),
	OPTION_ARG("port", 'p'), OPTION_ARG("ethertype", 'E'),
	OPTION_ARG("ready-file", 'R'),
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'i':
		o->ifname = arg;
		return 0;
	case 'c':
		return parse_u64("--count", arg, 0, 1000000000000ull, &o->count);
	case 't':
		return parse_seconds("--timeout", arg, MAX_SECONDS, &o->timeout);
	case 'D':
		return parse_seconds("--idle", arg, MAX_SECONDS, &o->idle);
	case 'I':
		return parse_u64("--interval", arg, 1, MAX_INTERVAL_MS,
				 &o->interval_ms);
	case 'p':
		return parse_u64("--port", arg, 1, 65535, &o->port);
	case 'E':
		return parse_u64("--ethertype", arg, 0x600, 0xffff,
				 &o->ethertype);
	case 'R':
		o->ready = arg;
		return 0;
	}
	return 0;
}

/*
 * A packet socket on o->ifname that hands over the 802.1Q tag the kernel
 * stripped, then the ready file; -1 after the message on error.
 */
static int sink_open(const struct opts *o)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(ETH_P_ALL) };
	int fd, one = 1, rcvbuf = 8 << 20;

	sll.sll_ifindex = if_nametoindex(o->ifname);
	if (!sll.sll_ifindex) {
		runtime_error("interface %s: %s", o->ifname, strerror(errno));
		return -1;
	}
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0 || bind(fd, (void *)&sll, sizeof(sll)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) {
		runtime_error("packet socket on %s: %s", o->ifname,
			      strerror(errno));
		goto err;
	}
	/* Bursts outrun us; FORCE needs CAP_NET_ADMIN, the fallback not. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (o->ready) {
		int rfd = open(o->ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (rfd < 0) {
			runtime_error("ready file %s: %s", o->ready,
				      strerror(errno));
			goto err;
		}
		close(rfd);
	}
	return fd;
err:
	if (fd >= 0)
		close(fd);
	return -1;
}

/*
 * The payload of a frame (ethertype proto, network header at l3) or NULL:
 * IPv4/UDP or IPv6/UDP to port, or the raw ethertype.
 */
static const uint8_t *find_payload(const uint8_t *l3, size_t len,
				   uint16_t proto, uint16_t port,
				   uint16_t ethertype, size_t *plen)
{
	const uint8_t *udp = NULL;
	size_t left = 0;

	if (proto == ethertype) {
		*plen = len;
		return l3;
	}
	if (proto == ETHERTYPE_IP && len >= 20 && (l3[0] >> 4) == 4) {
		size_t ihl = (size_t)(l3[0] & 0xf) * 4;

		if (l3[9] != 17 || ihl < 20 || len < ihl + 8)
			return NULL;
		udp = l3 + ihl;
		left = len - ihl;
	} else if (proto == ETHERTYPE_IPV6 && len >= 48 && (l3[0] >> 4) == 6) {
		if (l3[6] != 17)
			return NULL;
		udp = l3 + 40;
		left = len - 40;
	} else {
		return NULL;
	}
	if (((udp[2] << 8) | udp[3]) != port)
		return NULL;
	*plen = left - 8;
	return udp + 8;
}

/* The tag the kernel stripped on receive, from PACKET_AUXDATA. */
static void aux_tag(struct msghdr *msg, struct frame *fr)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR(msg, cm)) {
		struct tpacket_auxdata aux;

		if (cm->cmsg_level != SOL_PACKET ||
		    cm->cmsg_type != PACKET_AUXDATA)
			continue;
		memcpy(&aux, CMSG_DATA(cm), sizeof(aux));
		if (aux.tp_status & TP_STATUS_VLAN_VALID) {
			fr->vid = aux.tp_vlan_tci & 0x0fff;
			fr->pcp = aux.tp_vlan_tci >> 13;
		}
	}
}

/*
 * Read one frame that is waiting on s->fd into fr: its tag and where its
 * priosend payload is.  0 for a received frame; -1 for nothing to count
 * (none waiting, our own outgoing frames, runts).
 */
static int sink_read(struct sink *s, const struct opts *o, struct frame *fr)
{
	uint8_t cbuf[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
	struct iovec iov = { .iov_base = s->buf, .iov_len = sizeof(s->buf) };
	struct sockaddr_ll from;
	struct msghdr msg = { .msg_name = &from, .msg_namelen = sizeof(from),
			      .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	const uint8_t *l3 = s->buf + ETH_HLEN;
	size_t len;
	uint16_t proto;
	ssize_t n;

	n = recvmsg(s->fd, &msg, MSG_DONTWAIT);
	if (n < ETH_HLEN || from.sll_pkttype == PACKET_OUTGOING)
		return -1;
	len = (size_t)n - ETH_HLEN;
	fr->vid = -1;
	fr->pcp = 0;
	aux_tag(&msg, fr);
	/* A tag the kernel stripped was 4 bytes on the wire. */
	fr->wire_len = (size_t)n + (fr->vid >= 0 ? 4 : 0);
	proto = (uint16_t)((s->buf[12] << 8) | s->buf[13]);
	if (proto == ETHERTYPE_VLAN && len >= 4) {
		/* still in the frame: the inner tag of two; aux has the outer */
		uint16_t tci = (uint16_t)((l3[0] << 8) | l3[1]);

		if (fr->vid < 0) {
			fr->vid = tci & 0x0fff;
			fr->pcp = tci >> 13;
		}
		proto = (uint16_t)((l3[2] << 8) | l3[3]);
		l3 += 4;
		len -= 4;
	}
	fr->payload = find_payload(l3, len, proto, (uint16_t)o->port,
				   (uint16_t)o->ethertype, &fr->payload_len);
	return 0;
}

static void tally_add(struct tally *t, uint32_t key)
{
	int i;

	for (i = 0; i < t->len && t->key[i] != key; i++)
		;
	if (i == t->len) {
		/* the lab uses a handful; more is noise we do not report */
		if (t->len == MAX_KEYS)
			return;
		t->key[t->len++] = key;
	}
	t->frames[i]++;
}

static struct flow *flow_get(struct sink *s, uint32_t id)
{
	struct flow *f;

	for (int i = 0; i < s->nflows; i++)
		if (s->flows[i].id == id)
			return &s->flows[i];
	if (s->nflows == MAX_FLOWS)
		return NULL;
	f = &s->flows[s->nflows++];
	f->id = id;
	seqtrack_init(&f->seq);
	return f;
}

/* Count fr to its flow, PCP, VID and priority (true), or as other. */
static bool sink_account(struct sink *s, const struct frame *fr)
{
	struct payload p;
	struct flow *f;

	if (!fr->payload || payload_get(fr->payload, fr->payload_len, &p) < 0)
		goto other;
	f = flow_get(s, p.flow);
	if (!f || seqtrack_add(&f->seq, p.seq) < 0)
		goto other;
	if (fr->vid < 0) {
		f->untagged++;
	} else {
		f->pcp[fr->pcp]++;
		tally_add(&f->vid, (uint32_t)fr->vid);
	}
	tally_add(&f->prio, p.so_priority);
	s->frames++;
	return true;
other:
	s->other++;
	return false;
}

static void print_tally(const char *array, const char *key, const char *fmt,
			const struct tally *t)
{
	open_json_array(array);
	for (int i = 0; i < t->len; i++) {
		open_json_object(NULL);
		print_uint(PRINT_ANY, key, fmt, t->key[i]);
		print_uint(PRINT_ANY, "frames", "=%llu", t->frames[i]);
		close_json_object();
	}
	close_json_array();
}

static void print_flow(const struct flow *f)
{
	char fmt[16];

	open_json_object(NULL);
	print_uint(PRINT_ANY, "flow", "%6llu", f->id);
	print_uint(PRINT_ANY, "received", " %10llu", f->seq.received);
	print_uint(PRINT_ANY, "lost", " %8llu", seqtrack_lost(&f->seq));
	print_uint(PRINT_ANY, "duplicates", " %6llu", f->seq.duplicates);
	print_uint(PRINT_ANY, "reordered", " %9llu ", f->seq.reordered);
	print_uint(PRINT_JSON, "max_seq", NULL, f->seq.max_seq);
	/* JSON has every PCP, zeros too; text only the PCPs seen. */
	open_json_array("pcp");
	for (int p = 0; p < NUM_PCP; p++) {
		snprintf(fmt, sizeof(fmt), " pcp%d=%%llu", p);
		print_uint(f->pcp[p] ? PRINT_ANY : PRINT_JSON, NULL, fmt,
			   f->pcp[p]);
	}
	close_json_array();
	print_uint(f->untagged ? PRINT_ANY : PRINT_JSON, "untagged",
		   " untagged=%llu", f->untagged);
	print_tally("vid", "vid", " vid%llu", &f->vid);
	print_tally("so_priority", "priority", " prio%llu", &f->prio);
	close_json_object();
	print_text("\n");
}

/* The series grown to cover t seconds since the start; false when out of
 * memory (the series then stops growing; the totals go on). */
static bool series_reach(struct series *se, double t)
{
	size_t want = (size_t)(t / se->len) + 1;

	if (want <= se->n)
		return true;
	if (want > se->cap) {
		size_t cap = se->cap ? se->cap : 64;
		struct bucket *b;

		while (cap < want)
			cap *= 2;
		b = realloc(se->b, cap * sizeof(*b));
		if (!b)
			return false;
		se->b = b;
		se->cap = cap;
	}
	memset(se->b + se->n, 0, (want - se->n) * sizeof(*se->b));
	se->n = want;
	return true;
}

static void series_add(struct series *se, double t, const struct frame *fr)
{
	struct bucket *b;

	if (!se->len || !series_reach(se, t))
		return;
	b = &se->b[(size_t)(t / se->len)];
	if (fr->vid < 0) {
		b->untagged_frames++;
		b->untagged_bytes += fr->wire_len;
	} else {
		b->frames[fr->pcp]++;
		b->bytes[fr->pcp] += fr->wire_len;
	}
}

/* Interval i: start, length (the last one may be cut short by the end),
 * then per PCP frames and bytes; text shows only the PCPs that had any. */
static void print_bucket(const struct series *se, size_t i, double end)
{
	const struct bucket *b = &se->b[i];
	double start = (double)i * se->len;
	double len = end - start < se->len ? end - start : se->len;
	char fmt[32];

	open_json_object(NULL);
	print_float(PRINT_ANY, "t_s", "%9.3f s", start);
	print_float(PRINT_JSON, "len_s", NULL, len);
	open_json_array("pcp_frames");
	for (int p = 0; p < NUM_PCP; p++) {
		snprintf(fmt, sizeof(fmt), " pcp%d %%llu", p);
		print_uint(b->frames[p] ? PRINT_ANY : PRINT_JSON, NULL, fmt,
			   b->frames[p]);
		if (b->frames[p])
			print_uint(PRINT_FP, NULL, " (%llu B)", b->bytes[p]);
	}
	close_json_array();
	open_json_array("pcp_bytes");
	for (int p = 0; p < NUM_PCP; p++)
		print_uint(PRINT_JSON, NULL, NULL, b->bytes[p]);
	close_json_array();
	print_uint(b->untagged_frames ? PRINT_ANY : PRINT_JSON,
		   "untagged_frames", " untagged %llu", b->untagged_frames);
	print_uint(b->untagged_frames ? PRINT_ANY : PRINT_JSON,
		   "untagged_bytes", " (%llu B)", b->untagged_bytes);
	close_json_object();
	print_text("\n");
}

/* Text mode: print the intervals that ended by t, or with last all of
 * them, the one cut short by the end too (none with -j). */
static void series_flush(struct sink *s, const struct opts *o, double t,
			 bool last)
{
	struct series *se = &s->series;

	if (!se->len || o->cli.json)
		return;
	series_reach(se, t);
	for (; se->printed < se->n &&
	       (last || (double)(se->printed + 1) * se->len <= t);
	     se->printed++) {
		new_json_obj(stdout, false);
		print_bucket(se, se->printed, t);
		delete_json_obj();
	}
}

static void print_result(const struct sink *s, const struct opts *o,
			 uint64_t drops, double elapsed)
{
	new_json_obj(stdout, o->cli.json);
	print_string(PRINT_ANY, "interface", "priosink on %s:", o->ifname);
	print_uint(PRINT_ANY, "frames", " %llu frames,", s->frames);
	print_uint(PRINT_ANY, "other", " %llu other,", s->other);
	print_uint(PRINT_ANY, "socket_drops", " %llu socket drops,", drops);
	print_float(PRINT_ANY, "elapsed_s", " %.3f s\n", elapsed);
	print_text("%6s %10s %8s %6s %9s  per PCP, VID, SO_PRIORITY\n", "flow",
		   "received", "lost", "dup", "reordered");
	open_json_array("flows");
	for (int i = 0; i < s->nflows; i++)
		print_flow(&s->flows[i]);
	close_json_array();
	if (s->series.len && o->cli.json) {
		open_json_array("intervals");
		for (size_t i = 0; i < s->series.n; i++)
			print_bucket(&s->series, i, elapsed);
		close_json_array();
	}
	delete_json_obj();
}

/* Seconds to wait for the next frame: what is left of timeout or idle. */
static double time_left(const struct sink *s, const struct opts *o,
			double t0, double last)
{
	double t = now(), left = o->timeout - (t - t0);

	if (o->idle > 0 && s->frames && o->idle - (t - last) < left)
		left = o->idle - (t - last);
	return left;
}

/* Text mode with --interval: at most until the current interval ends. */
static double poll_wait(const struct sink *s, const struct opts *o,
			double t0, double left)
{
	const struct series *se = &s->series;
	double next;

	if (!se->len || o->cli.json)
		return left;
	next = ((double)se->printed + 1) * se->len - (now() - t0);
	return next < left ? (next > 0 ? next : 0) : left;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.cli = { .shortopts = ":i:c:t:p:E:R:jh", .longopts = longopts,
			 .usage = usage, .set = set_option, .ctx = &o },
		.port = DEFAULT_PORT, .ethertype = DEFAULT_ETHERTYPE,
		.timeout = 10,
	};
	static struct sink s;
	struct tpacket_stats st;
	socklen_t len = sizeof(st);
	uint64_t drops = 0;
	double t0, last = 0, wait;
	int err;

	progname = "priosink";
	err = parse_options(argc, argv, &o.cli);
	if (err)
		return err;
	if (!o.ifname)
		return usage_error("need -i IFACE");
	if (o.interval_ms &&
	    o.timeout / ((double)o.interval_ms / 1000) > MAX_INTERVALS)
		return usage_error("--interval %llu ms with --timeout %g s: "
				   "more than %.0f intervals",
				   (unsigned long long)o.interval_ms,
				   o.timeout, MAX_INTERVALS);
	s.series.len = (double)o.interval_ms / 1000;
	s.fd = sink_open(&o);
	if (s.fd < 0)
		return EXIT_FAILURE;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	t0 = now();
	while (!stop && (!o.count || s.frames < o.count) &&
	       (wait = time_left(&s, &o, t0, last)) > 0) {
		struct pollfd pfd = { .fd = s.fd, .events = POLLIN };
		struct frame fr;

		int r = poll(&pfd, 1,
			     (int)(poll_wait(&s, &o, t0, wait) * 1000) + 1);

		series_flush(&s, &o, now() - t0, false);
		if (r <= 0 || sink_read(&s, &o, &fr) < 0)
			continue;
		if (sink_account(&s, &fr)) {
			last = now();
			series_add(&s.series, last - t0, &fr);
		}
	}
	series_flush(&s, &o, now() - t0, true);
	if (getsockopt(s.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		drops = st.tp_drops;
	print_result(&s, &o, drops, now() - t0);
	return 0;
}
