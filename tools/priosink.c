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
#include "parse.h"
#include "payload.h"
#include "seqtrack.h"

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
#include <time.h>
#include <unistd.h>

#define MAX_FLOWS 64
#define MAX_VIDS 16
#define MAX_PRIOS 16
#define UNTAGGED 8		/* pcp index of frames without a tag */

struct flow {
	uint32_t id;
	struct seqtrack seq;
	uint64_t pcp[9];
	uint16_t vid[MAX_VIDS];
	uint64_t vid_count[MAX_VIDS];
	int nvids;
	uint32_t prio[MAX_PRIOS];
	uint64_t prio_count[MAX_PRIOS];
	int nprios;
};

static struct flow flows[MAX_FLOWS];
static int nflows;
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
"  -c, --count N           stop after N matching frames (0 = no limit)\n"
"  -t, --timeout SEC       stop after SEC seconds (default 10)\n"
"      --idle SEC          stop SEC seconds after the last frame (0 = off)\n"
"  -p, --port N            udp port to match (default %d)\n"
"  -E, --ethertype N       raw ethertype to match (default 0x%04x)\n"
"  -R, --ready-file PATH   create PATH once the socket is bound\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n", DEFAULT_PORT, DEFAULT_ETHERTYPE);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct flow *flow_get(uint32_t id)
{
	for (int i = 0; i < nflows; i++)
		if (flows[i].id == id)
			return &flows[i];
	if (nflows == MAX_FLOWS)
		return NULL;
	flows[nflows].id = id;
	seqtrack_init(&flows[nflows].seq);
	return &flows[nflows++];
}

static void count_vid(struct flow *f, int vid)
{
	int i;

	if (vid < 0)
		return;
	for (i = 0; i < f->nvids && f->vid[i] != vid; i++)
		;
	if (i == f->nvids) {
		if (f->nvids == MAX_VIDS)
			return;
		f->vid[f->nvids++] = (uint16_t)vid;
	}
	f->vid_count[i]++;
}

static void count_prio(struct flow *f, uint32_t prio)
{
	int i;

	for (i = 0; i < f->nprios && f->prio[i] != prio; i++)
		;
	if (i == f->nprios) {
		if (f->nprios == MAX_PRIOS)
			return;
		f->prio[f->nprios++] = prio;
	}
	f->prio_count[i]++;
}

/*
 * The payload of frame (ethertype proto, network header at l3) or NULL:
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

static void print_json(const char *ifname, uint64_t frames, uint64_t other,
		       uint64_t drops, double elapsed)
{
	printf("{\"interface\":\"%s\",\"frames\":%llu,\"other\":%llu,"
	       "\"socket_drops\":%llu,\"elapsed_s\":%.6f,\"flows\":[",
	       ifname, (unsigned long long)frames, (unsigned long long)other,
	       (unsigned long long)drops, elapsed);
	for (int i = 0; i < nflows; i++) {
		struct flow *f = &flows[i];
		const char *sep = "";

		printf("%s{\"flow\":%u,\"received\":%llu,\"lost\":%llu,"
		       "\"duplicates\":%llu,\"reordered\":%llu,\"max_seq\":%llu,"
		       "\"pcp\":{", i ? "," : "", f->id,
		       (unsigned long long)f->seq.received,
		       (unsigned long long)seqtrack_lost(&f->seq),
		       (unsigned long long)f->seq.duplicates,
		       (unsigned long long)f->seq.reordered,
		       (unsigned long long)f->seq.max_seq);
		for (int p = 0; p < 9; p++) {
			if (!f->pcp[p])
				continue;
			if (p == UNTAGGED)
				printf("%s\"untagged\":%llu", sep,
				       (unsigned long long)f->pcp[p]);
			else
				printf("%s\"%d\":%llu", sep, p,
				       (unsigned long long)f->pcp[p]);
			sep = ",";
		}
		printf("},\"vid\":{");
		for (int v = 0; v < f->nvids; v++)
			printf("%s\"%u\":%llu", v ? "," : "", f->vid[v],
			       (unsigned long long)f->vid_count[v]);
		printf("},\"so_priority\":{");
		for (int p = 0; p < f->nprios; p++)
			printf("%s\"%u\":%llu", p ? "," : "", f->prio[p],
			       (unsigned long long)f->prio_count[p]);
		printf("}}");
	}
	printf("]}\n");
}

static void print_table(const char *ifname, uint64_t frames, uint64_t other,
			uint64_t drops, double elapsed)
{
	printf("priosink on %s: %llu frames in %.3f s, %llu other, "
	       "%llu socket drops\n", ifname, (unsigned long long)frames,
	       elapsed, (unsigned long long)other, (unsigned long long)drops);
	printf("%6s %10s %8s %6s %9s  per PCP\n", "flow", "received", "lost",
	       "dup", "reordered");
	for (int i = 0; i < nflows; i++) {
		struct flow *f = &flows[i];

		printf("%6u %10llu %8llu %6llu %9llu ", f->id,
		       (unsigned long long)f->seq.received,
		       (unsigned long long)seqtrack_lost(&f->seq),
		       (unsigned long long)f->seq.duplicates,
		       (unsigned long long)f->seq.reordered);
		for (int p = 0; p < 9; p++)
			if (f->pcp[p])
				printf(" %s%d=%llu", p == UNTAGGED ? "untagged" : "pcp",
				       p == UNTAGGED ? 0 : p,
				       (unsigned long long)f->pcp[p]);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "interface", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "idle", required_argument, NULL, 'D' },
		{ "port", required_argument, NULL, 'p' },
		{ "ethertype", required_argument, NULL, 'E' },
		{ "ready-file", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ifname = NULL, *ready = NULL;
	uint64_t count = 0, port = DEFAULT_PORT, ethertype = DEFAULT_ETHERTYPE;
	uint64_t frames = 0, other = 0, drops = 0;
	double timeout = 10, idle = 0, t0, last = 0, t;
	int json = 0, c, fd, one = 1, rcvbuf = 8 << 20;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	uint8_t buf[65536], cbuf[CMSG_SPACE(sizeof(struct tpacket_auxdata))];

	while ((c = getopt_long(argc, argv, "i:c:t:p:E:R:jh", lo, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'i': ifname = optarg; break;
		case 'c': bad = parse_u64("--count", optarg, 0, 1000000000000ull, &count); break;
		case 't': bad = parse_seconds("--timeout", optarg, &timeout); break;
		case 'D': bad = parse_seconds("--idle", optarg, &idle); break;
		case 'p': bad = parse_u64("--port", optarg, 1, 65535, &port); break;
		case 'E': bad = parse_u64("--ethertype", optarg, 0x600, 0xffff, &ethertype); break;
		case 'R': ready = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: bad = 1;
		}
		if (bad) {
			fprintf(stderr, "try priosink -h\n");
			return 2;
		}
	}
	if (!ifname || optind != argc) {
		fprintf(stderr, "priosink: need -i IFACE and no other "
			"arguments; try priosink -h\n");
		return 2;
	}
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = if_nametoindex(ifname);
	if (!sll.sll_ifindex) {
		fprintf(stderr, "priosink: interface %s: %s\n", ifname,
			strerror(errno));
		return 1;
	}
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0 || bind(fd, (void *)&sll, sizeof(sll)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) {
		fprintf(stderr, "priosink: packet socket on %s: %s\n", ifname,
			strerror(errno));
		return 1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (ready) {
		int rfd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (rfd < 0) {
			fprintf(stderr, "priosink: ready file %s: %s\n", ready,
				strerror(errno));
			return 1;
		}
		close(rfd);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	t0 = now();
	while (!stop && (!count || frames < count)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct sockaddr_ll from;
		struct msghdr msg = { .msg_name = &from,
				      .msg_namelen = sizeof(from),
				      .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf,
				      .msg_controllen = sizeof(cbuf) };
		double wait = timeout - ((t = now()) - t0);
		ssize_t n;
		int vid = -1, pcp = UNTAGGED;
		uint16_t proto;
		const uint8_t *l3, *pl;
		size_t l3len, plen;
		struct payload p;
		struct flow *f;

		if (idle > 0 && frames && idle - (t - last) < wait)
			wait = idle - (t - last);
		if (wait <= 0)
			break;
		if (poll(&pfd, 1, (int)(wait * 1000) + 1) <= 0)
			continue;
		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n < 0)
			continue;
		if (from.sll_pkttype == PACKET_OUTGOING || n < 14)
			continue;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm;
		     cm = CMSG_NXTHDR(&msg, cm)) {
			struct tpacket_auxdata aux;

			if (cm->cmsg_level != SOL_PACKET ||
			    cm->cmsg_type != PACKET_AUXDATA)
				continue;
			memcpy(&aux, CMSG_DATA(cm), sizeof(aux));
			if (aux.tp_status & TP_STATUS_VLAN_VALID) {
				vid = aux.tp_vlan_tci & 0x0fff;
				pcp = aux.tp_vlan_tci >> 13;
			}
		}
		proto = (uint16_t)((buf[12] << 8) | buf[13]);
		l3 = buf + 14;
		l3len = (size_t)n - 14;
		if (proto == ETHERTYPE_VLAN && l3len >= 4) {
			/* a tag the kernel left in the frame */
			uint16_t tci = (uint16_t)((l3[0] << 8) | l3[1]);

			if (vid < 0) {
				vid = tci & 0x0fff;
				pcp = tci >> 13;
			}
			proto = (uint16_t)((l3[2] << 8) | l3[3]);
			l3 += 4;
			l3len -= 4;
		}
		pl = find_payload(l3, l3len, proto, (uint16_t)port,
				  (uint16_t)ethertype, &plen);
		if (!pl || payload_get(pl, plen, &p) < 0) {
			other++;
			continue;
		}
		f = flow_get(p.flow);
		if (!f || seqtrack_add(&f->seq, p.seq) < 0) {
			other++;
			continue;
		}
		f->pcp[pcp]++;
		count_vid(f, vid);
		count_prio(f, p.so_priority);
		frames++;
		last = now();
	}
	{
		struct tpacket_stats st;
		socklen_t len = sizeof(st);

		if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st,
			       &len) == 0)
			drops = st.tp_drops;
	}
	t = now() - t0;
	if (json)
		print_json(ifname, frames, other, drops, t);
	else
		print_table(ifname, frames, other, drops, t);
	return 0;
}
