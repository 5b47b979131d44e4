// SPDX-License-Identifier: GPL-2.0
/*
 * pfcsend - send IEEE 802.1Qbb PFC frames by hand, for tests and teaching.
 *
 * The frames leave IFACE as a MAC control frame would, past the qdisc
 * (PACKET_QDISC_BYPASS); the driver counts them in the port's PFC
 * "requests" (dcb -s pfc show dev IFACE).  --vector, --opcode, --length
 * and --dst make malformed frames on purpose.
 */
#include "pfc.h"
#include "util.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SPEED 1000	/* Mbit/s: the driver's, when none is set */

struct opts {
	struct cli cli;
	const char *ifname;
	uint64_t prios, quanta, count, opcode, length, vector;
	bool prios_set, vector_set;
	double interval;
	uint8_t dst[6];
};

static void usage(void)
{
	printf(
"usage: pfcsend [OPTIONS] -I IFACE -p PRIOS\n"
"Send 802.1Qbb PFC frames (to 01:80:c2:00:00:01, EtherType 0x8808).\n"
"  -I, --interface IFACE   the port to send on (required)\n"
"  -p, --prio LIST         priorities to pause: 3, 2,3 or all\n"
"  -q, --quanta N          pause time of each, 0..65535 quanta of 512 bit\n"
"                          times (default 65535; 0 = XON, resume)\n"
"  -c, --count N           frames (default 1)\n"
"  -i, --interval S        seconds between frames (default 0.01)\n"
"      --vector N          the class-enable vector as it is, 0..0xffff\n"
"                          (instead of -p; bits 8..15 are reserved)\n"
"      --opcode N          MAC control opcode (default 0x0101: PFC)\n"
"      --length N          frame bytes before the FCS, 14..1514 (default\n"
"                          60; below 34 the frame is cut short)\n"
"      --dst MAC           destination (default 01:80:c2:00:00:01)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"A time in quanta lasts N x 512 / speed: 65535 quanta are 33.6 ms at\n"
"1 Gbit/s, the speed virtio_net assumes when the device reports none.\n");
}

static const struct option longopts[] = {
	OPTION_ARG("interface", 'I'), OPTION_ARG("prio", 'p'),
	OPTION_ARG("quanta", 'q'), OPTION_ARG("count", 'c'),
	OPTION_ARG("interval", 'i'), OPTION_ARG("vector", 'V'),
	OPTION_ARG("opcode", 'O'), OPTION_ARG("length", 'L'),
	OPTION_ARG("dst", 'D'),
	COMMON_OPTIONS,
};

/* "3", "2,3", "all" into a bit set of priorities 0..7 */
static int parse_prios(const char *arg, uint64_t *out)
{
	const char *p = arg;

	*out = 0;
	if (!strcmp(arg, "all")) {
		*out = 0xff;
		return 0;
	}
	for (;;) {
		if (*p < '0' || *p > '7' || (p[1] && p[1] != ','))
			return usage_error("--prio '%s' is not a list of "
					   "priorities 0..7 or all", arg);
		*out |= 1u << (*p - '0');
		if (!p[1])
			return 0;
		p += 2;
	}
}

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'I':
		o->ifname = arg;
		return 0;
	case 'p':
		o->prios_set = true;
		return parse_prios(arg, &o->prios);
	case 'q':
		return parse_u64("--quanta", arg, 0, 65535, &o->quanta);
	case 'c':
		return parse_u64("--count", arg, 1, 1000000000, &o->count);
	case 'i':
		return parse_seconds("--interval", arg, 3600, &o->interval);
	case 'V':
		o->vector_set = true;
		return parse_u64("--vector", arg, 0, 0xffff, &o->vector);
	case 'O':
		return parse_u64("--opcode", arg, 0, 0xffff, &o->opcode);
	case 'L':
		return parse_u64("--length", arg, 14, 1514, &o->length);
	case 'D':
		return parse_mac("--dst", arg, o->dst);
	}
	return 0;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.cli = { .shortopts = ":I:p:q:c:i:jh", .longopts = longopts,
			 .usage = usage, .set = set_option, .ctx = &o },
		.quanta = 65535, .count = 1, .interval = 0.01,
		.opcode = PFC_OPCODE, .length = PFC_FRAME_MIN,
	};
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(PFC_ETHERTYPE),
				   .sll_halen = 6 };
	struct pfc_frame f = { .ethertype = PFC_ETHERTYPE };
	uint8_t buf[1514];
	struct ifreq ifr = { 0 };
	uint64_t sent = 0;
	int fd, err, one = 1, i;
	double t0;

	progname = "pfcsend";
	memcpy(o.dst, pfc_addr, 6);
	err = parse_options(argc, argv, &o.cli);
	if (err)
		return err;
	if (!o.ifname)
		return usage_error("--interface is required");
	if (!o.prios_set && !o.vector_set)
		return usage_error("--prio or --vector is required");
	if (o.prios_set && o.vector_set)
		return usage_error("--prio and --vector exclude each other");
	f.vector = (uint16_t)(o.vector_set ? o.vector : o.prios);
	f.opcode = (uint16_t)o.opcode;
	memcpy(f.dst, o.dst, 6);
	for (i = 0; i < PFC_PRIOS; i++)
		if (f.vector & 1u << i || o.vector_set)
			f.quanta[i] = (uint16_t)o.quanta;

	/* protocol 0: this socket receives nothing */
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0)
		return runtime_error("packet socket: %s", strerror(errno));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", o.ifname);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		return runtime_error("interface %s: %s", o.ifname,
				     strerror(errno));
	memcpy(f.src, ifr.ifr_hwaddr.sa_data, 6);
	sll.sll_ifindex = (int)if_nametoindex(o.ifname);
	memcpy(sll.sll_addr, f.dst, 6);
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)) < 0)
		return runtime_error("PACKET_QDISC_BYPASS: %s", strerror(errno));
	pfc_build(buf, o.length, &f);

	t0 = now();
	while (sent < o.count) {
		if (sendto(fd, buf, o.length, 0, (void *)&sll,
			   sizeof(sll)) < 0) {
			if (errno == ENOBUFS || errno == EAGAIN) {
				/* the queue is stopped: try again soon */
				sleep_s(0.0001);
				continue;
			}
			return runtime_error("send on %s: %s (after %llu "
					     "frames)", o.ifname,
					     strerror(errno),
					     (unsigned long long)sent);
		}
		if (++sent < o.count)
			sleep_s(o.interval);
	}
	close(fd);

	new_json_obj(stdout, o.cli.json);
	print_uint(PRINT_ANY, "sent", "pfcsend: %llu frames", sent);
	print_string(PRINT_ANY, "interface", " on %s", o.ifname);
	print_uint(PRINT_ANY, "vector", ", vector 0x%02llx", f.vector);
	print_uint(PRINT_ANY, "quanta", ", quanta %llu", o.quanta);
	print_float(PRINT_ANY, "pause_ms", " (%.3f ms at 1 Gbit/s)",
		    pfc_quanta_s((unsigned int)o.quanta, DEFAULT_SPEED) * 1e3);
	print_float(PRINT_ANY, "elapsed_s", " in %.3f s", now() - t0);
	print_uint(PRINT_JSON, "opcode", NULL, o.opcode);
	print_uint(PRINT_JSON, "length", NULL, o.length);
	print_text("\n");
	delete_json_obj();
	return 0;
}
