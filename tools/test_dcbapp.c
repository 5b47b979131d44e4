// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of dcbapp-netprio: the parser on messages built byte by byte the
 * way net/dcb/dcbnl.c builds them (dcbnl_newmsg() + dcbnl_ieee_fill()),
 * and broken in every way dcbapp.h lists; the engine against a fake cgroup
 * root and a fake sysfs in a temporary directory; the binary's command
 * line (never its socket: that would be the host's netlink).
 *
 *   test_dcbapp OUT/dcbapp-netprio
 */
#define _GNU_SOURCE	/* nftw */
#include "check.h"
#include "dcbapp.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int checks_passed, checks_failed;

/* ---- messages, as the kernel's nlmsg_put() / nla_put() lay them out ---- */

struct mb {
	uint8_t buf[16384];
	size_t len, nlh;
};

static void mb_raw(struct mb *b, const void *data, size_t len)
{
	if (len)
		memcpy(b->buf + b->len, data, len);
	b->len += len;
}

static void mb_pad(struct mb *b)
{
	while (b->len % 4)
		b->buf[b->len++] = 0;
}

static void mb_msg(struct mb *b, uint16_t type, uint8_t cmd, uint32_t seq,
		   uint32_t pid)
{
	struct nlmsghdr h = { .nlmsg_type = type, .nlmsg_seq = seq,
			      .nlmsg_pid = pid };
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = cmd };

	mb_pad(b);
	b->nlh = b->len;
	mb_raw(b, &h, sizeof(h));
	mb_raw(b, &d, sizeof(d));
	mb_pad(b);
}

static void mb_put(struct mb *b, uint16_t type, const void *data,
		   size_t len)
{
	struct nlattr a = { .nla_len = NLA_HDRLEN + len, .nla_type = type };

	mb_raw(b, &a, sizeof(a));
	mb_raw(b, data, len);
	mb_pad(b);
}

static size_t mb_nest(struct mb *b, uint16_t type)
{
	size_t start = b->len;

	mb_put(b, type, NULL, 0);
	return start;
}

static void mb_nest_end(struct mb *b, size_t start)
{
	uint16_t len = b->len - start;

	memcpy(b->buf + start, &len, sizeof(len));
}

static void mb_end(struct mb *b)
{
	uint32_t len = b->len - b->nlh;

	memcpy(b->buf + b->nlh, &len, sizeof(len));
}

/* Where mb_ieee() put its attributes, to break them in place. */
static struct {
	size_t pfc, app_table, dcbx;
} at;

/* dcbnl_ieee_fill() of a driver with ETS, PFC, peer APP and getdcbx. */
static void mb_ieee(struct mb *b, uint16_t type, uint8_t cmd, uint32_t seq,
		    const char *ifname, const struct dcb_app *apps, int n)
{
	struct ieee_ets ets = { .ets_cap = 8, .prio_tc = { 0, 1, 2, 3 } };
	struct ieee_pfc pfc = { .pfc_cap = 8, .pfc_en = 0x20 };
	struct dcb_peer_app_info info = { 0 };
	struct dcb_app peer = { 2, 7, 4791 };
	uint8_t dcbx = DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE;
	size_t ieee, app;

	mb_msg(b, type, cmd, seq, 0);
	mb_put(b, DCB_ATTR_IFNAME, ifname, strlen(ifname) + 1);
	ieee = mb_nest(b, DCB_ATTR_IEEE);
	mb_put(b, DCB_ATTR_IEEE_ETS, &ets, sizeof(ets));
	at.pfc = b->len;
	mb_put(b, DCB_ATTR_IEEE_PFC, &pfc, sizeof(pfc));
	at.app_table = b->len;
	app = mb_nest(b, DCB_ATTR_IEEE_APP_TABLE);
	for (int i = 0; i < n; i++)
		mb_put(b, DCB_ATTR_IEEE_APP, &apps[i], sizeof(apps[i]));
	mb_nest_end(b, app);
	mb_put(b, DCB_ATTR_IEEE_PEER_ETS, &ets, sizeof(ets));
	/* dcbnl_build_peer_app(): the same DCB_ATTR_IEEE_APP, not ours. */
	app = mb_nest(b, DCB_ATTR_IEEE_PEER_APP);
	mb_put(b, DCB_ATTR_IEEE_APP_UNSPEC, &info, sizeof(info));
	mb_put(b, DCB_ATTR_IEEE_APP, &peer, sizeof(peer));
	mb_nest_end(b, app);
	mb_nest_end(b, ieee);
	at.dcbx = b->len;
	mb_put(b, DCB_ATTR_DCBX, &dcbx, sizeof(dcbx));
	mb_end(b);
}

static void set_u16(struct mb *b, size_t off, uint16_t v)
{
	memcpy(b->buf + off, &v, 2);
}

/* ---- what the parser reported ---- */

static char reports[1 << 18];
static int nreports;

static void on_report(void *ctx, const char *line)
{
	(void)ctx;
	nreports++;
	snprintf(reports + strlen(reports), sizeof(reports) - strlen(reports),
		 "%s\n", line);
}

static const struct dcbapp_report rep = { on_report, NULL };

static struct dcbapp_table table;

/* The one message in b, parsed; reports from scratch. */
static enum dcbapp_parsed parse(const struct mb *b)
{
	struct dcbapp_msg m;
	size_t off = 0;

	reports[0] = '\0';
	nreports = 0;
	if (dcbapp_next_msg(b->buf, b->len, &off, &m, &rep) != 1)
		return -1;
	return dcbapp_parse_dcb(&m, &table, &rep);
}

static bool reported(const char *text)
{
	if (getenv("TEST_DCBAPP_DEBUG"))
		fprintf(stderr, "reports: %s", reports);
	return strstr(reports, text) != NULL;
}

static const struct dcb_app two[] = {
	{ IEEE_8021QAZ_APP_SEL_DGRAM, 5, 4791 },
	{ IEEE_8021QAZ_APP_SEL_ETHERTYPE, 3, 0x8906 },
};

static void test_notification_of_ieee_set_is_a_table(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 7, "eth0", two, 2);
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(!strcmp(table.ifname, "eth0"));
	CHECK(table.cmd == DCB_CMD_IEEE_SET);
	CHECK(table.n == 2 && table.nfrozen == 0);
	CHECK(table.e[0].selector == 3 && table.e[0].priority == 5 &&
	      table.e[0].protocol == 4791);
	CHECK(table.e[1].selector == 1 && table.e[1].priority == 3 &&
	      table.e[1].protocol == 0x8906);
	CHECK(nreports == 0);
}

static void test_reply_to_ieee_get_is_a_table(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_GETDCB, DCB_CMD_IEEE_GET, 1, "eth1", two, 1);
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(!strcmp(table.ifname, "eth1") && table.n == 1);
}

static void test_ieee_del_leaving_no_entry_is_an_empty_table(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_DEL, 9, "eth0", NULL, 0);
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(table.n == 0 && table.cmd == DCB_CMD_IEEE_DEL);
}

static void test_peer_app_entries_are_not_the_table(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 7, "eth0", NULL, 0);
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(table.n == 0);	/* the peer's {2, 7, 4791} is not counted */
}

static void test_cee_message_is_not_an_ieee_table(void)
{
	static struct mb b;

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_CEE_GET, 3, 0);
	mb_put(&b, DCB_ATTR_IFNAME, "eth0", 5);
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_OTHER);
	CHECK(nreports == 0);
}

static void test_duplicate_entries_count_once(void)
{
	static const struct dcb_app dup[] = { { 3, 5, 4791 }, { 3, 5, 4791 } };
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 7, "eth0", dup, 2);
	CHECK(parse(&b) == DCBAPP_TABLE && table.n == 1);
}

static void test_two_messages_in_one_datagram_are_both_read(void)
{
	static struct mb b;
	struct dcbapp_msg m;
	size_t off = 0;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 1, "eth0", two, 2);
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 2, "eth1", two, 1);
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == 1 &&
	      m.seq == 1);
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == 1 &&
	      m.seq == 2 && dcbapp_parse_dcb(&m, &table, &rep) ==
	      DCBAPP_TABLE && !strcmp(table.ifname, "eth1"));
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == 0);
}

static void test_truncated_nlmsghdr_drops_the_rest(void)
{
	static struct mb b;
	struct dcbapp_msg m;
	size_t off = 0;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 1, "eth0", two, 2);
	reports[0] = '\0';
	CHECK(dcbapp_next_msg(b.buf, 10, &off, &m, &rep) == -1);
	CHECK(off == 10 && reported("too short for a struct nlmsghdr"));
	off = 0;
	CHECK(dcbapp_next_msg(b.buf, b.len - 4, &off, &m, &rep) == -1);
	CHECK(reported("nlmsg_len"));
	/* nlmsg_len below its own header */
	set_u16(&b, 0, 8);
	off = 0;
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == -1);
}

static void test_message_too_short_for_dcbmsg_is_ignored(void)
{
	static struct mb b;

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 1, 0);
	b.len = NLMSG_HDRLEN + 2;
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("too short for a struct dcbmsg"));
}

static void test_nla_len_beyond_message_is_malformed(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	set_u16(&b, at.dcbx, 200);
	CHECK(parse(&b) == DCBAPP_MALFORMED);
	CHECK(reported("RTM_SETDCB seq 4 cmd IEEE_SET: attribute type 14: "
		       "nla_len 200, only 8 bytes left: message ignored"));
	CHECK(table.n == 0);
}

static void test_nla_len_below_header_is_malformed_at_each_level(void)
{
	static struct mb b;
	size_t app;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	set_u16(&b, NLMSG_HDRLEN + 4, 2);	/* DCB_ATTR_IFNAME */
	CHECK(parse(&b) == DCBAPP_MALFORMED && reported("nla_len 2 is "
							"below"));

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	set_u16(&b, at.pfc, 3);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("(eth0): DCB_ATTR_IEEE: attribute type 2: nla_len 3"));

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	app = at.app_table;
	set_u16(&b, app + 4 + 8, 0);		/* the second entry */
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("DCB_ATTR_IEEE/DCB_ATTR_IEEE_APP_TABLE: attribute "
		       "type 1: nla_len 0") && table.n == 0);
}

static void test_nest_longer_than_its_parent_is_malformed(void)
{
	static struct mb b;
	size_t app;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	app = at.app_table;
	set_u16(&b, app, 400);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("DCB_ATTR_IEEE: attribute type 3: nla_len 400"));

	/* The whole message cut inside the APP table. */
	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	b.len = app + 4 + 8 + 2;
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED && table.n == 0);
}

static void test_stray_bytes_after_attributes_are_malformed(void)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 4, "eth0", two, 2);
	b.buf[b.len] = b.buf[b.len + 1] = 0;
	b.len += 2;
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("2 stray bytes after the last attribute"));
}

static void test_app_with_wrong_payload_size_ignores_the_message(void)
{
	static const size_t sizes[] = { 0, 3, 5, 8 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		static struct mb b;
		uint8_t payload[8] = { 3, 5, 0xb7, 0x12, 0, 0, 0, 0 };
		size_t ieee, app;
		char want[64];

		b.len = 0;
		mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 5, 0);
		mb_put(&b, DCB_ATTR_IFNAME, "eth0", 5);
		ieee = mb_nest(&b, DCB_ATTR_IEEE);
		app = mb_nest(&b, DCB_ATTR_IEEE_APP_TABLE);
		mb_put(&b, DCB_ATTR_IEEE_APP, &two[0], sizeof(two[0]));
		mb_put(&b, DCB_ATTR_IEEE_APP, payload, sizes[i]);
		mb_nest_end(&b, app);
		mb_nest_end(&b, ieee);
		mb_end(&b);
		snprintf(want, sizeof(want), "DCB_ATTR_IEEE_APP #2: payload "
			 "of %zu bytes", sizes[i]);
		CHECK(parse(&b) == DCBAPP_MALFORMED && reported(want));
		CHECK(table.n == 0);
	}
}

/* One entry, next to a good one; the good one stays, the bad is frozen. */
static void check_bad_entry(struct dcb_app bad, const char *why)
{
	static struct mb b;
	struct dcb_app apps[2] = { two[1], bad };

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 6, "eth0", apps, 2);
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(table.n == 1 && table.e[0].protocol == 0x8906);
	CHECK(table.nfrozen == 1 && table.frozen[0].selector == bad.selector &&
	      table.frozen[0].protocol == bad.protocol);
	CHECK(nreports == 1 && reported(why) &&
	      reported("RTM_SETDCB seq 6 cmd IEEE_SET (eth0): "
		       "DCB_ATTR_IEEE_APP #2"));
}

static void test_unknown_selectors_are_skipped(void)
{
	check_bad_entry((struct dcb_app){ 0, 1, 80 }, "unknown selector");
	check_bad_entry((struct dcb_app){ 6, 1, 80 }, "unknown selector");
	check_bad_entry((struct dcb_app){ 255, 1, 80 }, "unknown selector");
}

static void test_priority_above_seven_is_skipped(void)
{
	check_bad_entry((struct dcb_app){ 3, 8, 4791 }, "priority above 7");
	check_bad_entry((struct dcb_app){ 2, 255, 80 }, "priority above 7");
}

static void test_dscp_above_63_is_skipped(void)
{
	static const struct dcb_app ok = { IEEE_8021QAZ_APP_SEL_DSCP, 4, 63 };
	static struct mb b;

	check_bad_entry((struct dcb_app){ 5, 4, 64 }, "DSCP above 63");
	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 6, "eth0", &ok, 1);
	CHECK(parse(&b) == DCBAPP_TABLE && table.n == 1 && !nreports);
}

/* More entries than a table holds: ignored whole, never written past. */
static void test_oversized_tables_are_malformed(void)
{
	static struct dcb_app many[DCBAPP_MAX_ENTRIES + 50];
	static struct mb b;
	const int n = DCBAPP_MAX_ENTRIES + 50;

	for (int i = 0; i < n; i++)
		many[i] = (struct dcb_app){ 2, 3, (uint16_t)(1000 + i) };
	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 6, "eth0", many, n);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("more than 1024 entries") && table.n == 0);
	for (int i = 0; i < n; i++)
		many[i].selector = 6;
	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 6, "eth0", many, n);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("more than 1024 invalid entries") &&
	      table.nfrozen == 0);
}

static void check_bad_ifname(const void *name, size_t len, const char *why)
{
	static struct mb b;
	size_t ieee, app;

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 8, 0);
	mb_put(&b, DCB_ATTR_IFNAME, name, len);
	ieee = mb_nest(&b, DCB_ATTR_IEEE);
	app = mb_nest(&b, DCB_ATTR_IEEE_APP_TABLE);
	mb_put(&b, DCB_ATTR_IEEE_APP, &two[0], sizeof(two[0]));
	mb_nest_end(&b, app);
	mb_nest_end(&b, ieee);
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED && reported("DCB_ATTR_IFNAME: ") &&
	      reported(why) && table.n == 0);
}

static void test_bad_ifname_ignores_the_message(void)
{
	check_bad_ifname("eth0", 4, "4 bytes without a NUL");
	check_bad_ifname("abcdefghijklmnop", 17, "name of 16 bytes");
	check_bad_ifname("", 1, "'' is not a valid device name");
	check_bad_ifname("../x", 5, "'../x' is not a valid device name");
	check_bad_ifname("..", 3, "is not a valid");
	check_bad_ifname("a b", 4, "is not a valid");
}

static void test_missing_attributes_ignore_the_message(void)
{
	static struct mb b;
	size_t ieee;

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 8, 0);
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED && reported("no DCB_ATTR_IFNAME"));

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 8, 0);
	mb_put(&b, DCB_ATTR_IFNAME, "eth0", 5);
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED && reported("no DCB_ATTR_IEEE:"));

	b.len = 0;
	mb_msg(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 8, 0);
	mb_put(&b, DCB_ATTR_IFNAME, "eth0", 5);
	ieee = mb_nest(&b, DCB_ATTR_IEEE);
	mb_nest_end(&b, ieee);
	mb_end(&b);
	CHECK(parse(&b) == DCBAPP_MALFORMED &&
	      reported("no DCB_ATTR_IEEE_APP_TABLE"));
}

/*
 * Every cut and many flipped bytes of a good message: never a crash (the
 * run under ASan/valgrind shows more), and a table only of valid entries.
 */
static void test_cut_and_corrupted_messages_never_yield_bad_entries(void)
{
	static struct mb good, b;
	static const struct dcb_app apps[] = {
		{ 3, 5, 4791 }, { 5, 2, 46 }, { 1, 3, 0x8906 }, { 2, 4, 3260 },
	};
	uint32_t rnd = 12345;
	bool all_valid = true, any_table = false;
	struct dcbapp_msg m;

	good.len = 0;
	mb_ieee(&good, RTM_SETDCB, DCB_CMD_IEEE_SET, 1, "eth0", apps, 4);
	for (size_t cut = 0; cut <= good.len; cut++) {
		size_t off = 0;

		b = good;
		b.len = cut;
		if (cut >= NLMSG_HDRLEN)
			mb_end(&b);
		while (dcbapp_next_msg(b.buf, b.len, &off, &m, NULL) > 0)
			dcbapp_parse_dcb(&m, &table, NULL);
	}
	for (int round = 0; round < 20000; round++) {
		size_t off = 0;

		b = good;
		for (int k = 0; k < 1 + round % 4; k++) {
			rnd = rnd * 1103515245 + 12345;
			b.buf[(rnd >> 8) % b.len] = rnd >> 20;
		}
		while (dcbapp_next_msg(b.buf, b.len, &off, &m, NULL) > 0) {
			if (m.type != RTM_SETDCB && m.type != RTM_GETDCB)
				continue;
			if (dcbapp_parse_dcb(&m, &table, NULL) != DCBAPP_TABLE)
				continue;
			any_table = true;
			for (int i = 0; i < table.n; i++)
				all_valid &= dcbapp_selector_name(
					table.e[i].selector) &&
					table.e[i].priority < 8 &&
					(table.e[i].selector != 5 ||
					 table.e[i].protocol < 64);
			all_valid &= dcbapp_valid_ifname(table.ifname);
		}
	}
	CHECK(all_valid);
	CHECK(any_table);
}

/*
 * Captured in the lab (6.1 + patch 0002, virtio eth0) with `dcbnl-raw eth0
 * get` after `dcb ets set ... tc-bw 0:70 1:30`, `dcb pfc set ... 3:on 4:on`
 * and `dcb app add dev eth0 dgram-port-prio 4791:5 ethtype-prio 0x8906:3
 * dscp-prio 46:6`: the kernel's RTM_GETDCB reply, IFNAME then the IEEE nest
 * (ETS, PFC, APP_TABLE) and DCB_ATTR_DCBX.
 */
static const char captured_get[] =
	"140100004e000100010000006600000000150000090001006574683000000000"
	"ec000d003f000100000800461e00000000000000000000000000000202000000"
	"0000000000010102020303000000000000000000000000000000000000000000"
	"000000008c000200081800000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000001c0003000800010005062e0008000100"
	"01030689080001000305b71205000e0009000000";

static size_t unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;

	for (; hex[0] && hex[1]; hex += 2) {
		unsigned int v;

		sscanf(hex, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

static bool in_capture(const struct dcbapp_entry *e)
{
	return (e->selector == 5 && e->priority == 6 && e->protocol == 46) ||
	       (e->selector == 1 && e->priority == 3 &&
		e->protocol == 0x8906) ||
	       (e->selector == 3 && e->priority == 5 && e->protocol == 4791);
}

static void test_captured_reply_from_the_lab_is_the_table(void)
{
	static struct mb good, b;
	bool only_captured = true;
	struct dcbapp_msg m;

	good.len = unhex(captured_get, good.buf);
	CHECK(good.len == 276);
	b = good;
	CHECK(parse(&b) == DCBAPP_TABLE);
	CHECK(!strcmp(table.ifname, "eth0"));
	CHECK(table.cmd == DCB_CMD_IEEE_GET);
	CHECK(table.n == 3 && in_capture(&table.e[0]) &&
	      in_capture(&table.e[1]) && in_capture(&table.e[2]));
	CHECK(table.e[0].selector != table.e[1].selector &&
	      table.e[1].selector != table.e[2].selector &&
	      table.e[0].selector != table.e[2].selector);
	CHECK(nreports == 0);
	/* Cut anywhere (the header still claiming 276 bytes): no table has
	 * an entry the capture does not hold. */
	for (size_t cut = 0; cut < good.len; cut++) {
		size_t off = 0;

		b = good;
		b.len = cut;
		while (dcbapp_next_msg(b.buf, b.len, &off, &m, NULL) > 0) {
			if (dcbapp_parse_dcb(&m, &table, NULL) != DCBAPP_TABLE)
				continue;
			for (int i = 0; i < table.n; i++)
				only_captured &= in_capture(&table.e[i]);
		}
	}
	CHECK(only_captured);
}

static void test_ieee_get_request_is_what_dcb_doit_wants(void)
{
	uint8_t buf[64], small[16];
	struct nlmsghdr h;
	struct dcbmsg d;
	struct nlattr a;
	size_t len = dcbapp_build_ieee_get(buf, sizeof(buf), "eth0", 42);

	CHECK(len == NLMSG_HDRLEN + 4 + NLA_ALIGN(NLA_HDRLEN + 5));
	memcpy(&h, buf, sizeof(h));
	memcpy(&d, buf + NLMSG_HDRLEN, sizeof(d));
	memcpy(&a, buf + NLMSG_HDRLEN + 4, sizeof(a));
	CHECK(h.nlmsg_len == len && h.nlmsg_type == RTM_GETDCB &&
	      h.nlmsg_flags == NLM_F_REQUEST && h.nlmsg_seq == 42);
	CHECK(d.dcb_family == AF_UNSPEC && d.cmd == DCB_CMD_IEEE_GET);
	CHECK(a.nla_type == DCB_ATTR_IFNAME && a.nla_len == NLA_HDRLEN + 5 &&
	      !memcmp(buf + NLMSG_HDRLEN + 8, "eth0\0\0\0\0", 8));
	CHECK(dcbapp_build_ieee_get(small, sizeof(small), "eth0", 1) == 0);
}

static void test_error_answer_gives_errno_and_request_seq(void)
{
	static struct mb b;
	struct nlmsgerr e = { .error = -EOPNOTSUPP,
			      .msg = { .nlmsg_seq = 17 } };
	struct nlmsghdr h = { .nlmsg_len = NLMSG_HDRLEN + sizeof(e),
			      .nlmsg_type = NLMSG_ERROR, .nlmsg_seq = 17 };
	struct dcbapp_msg m;
	uint32_t seq;
	size_t off = 0;
	int err;

	b.len = 0;
	mb_raw(&b, &h, sizeof(h));
	mb_raw(&b, &e, sizeof(e));
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == 1);
	CHECK(!dcbapp_parse_error(&m, &err, &seq, &rep) &&
	      err == EOPNOTSUPP && seq == 17);
	m.len = NLMSG_HDRLEN + 2;
	CHECK(dcbapp_parse_error(&m, &err, &seq, &rep) == -1);
}

static void test_link_messages_give_name_and_kind(void)
{
	static struct mb b;
	struct ifinfomsg ifi = { .ifi_index = 5 };
	struct nlmsghdr h = { .nlmsg_type = RTM_DELLINK };
	struct dcbapp_link l;
	struct dcbapp_msg m;
	size_t off = 0;

	b.len = 0;
	mb_raw(&b, &h, sizeof(h));
	mb_raw(&b, &ifi, sizeof(ifi));
	mb_put(&b, IFLA_MTU, "\xdc\x05\0\0", 4);
	mb_put(&b, IFLA_IFNAME, "eth0.100", 9);
	b.nlh = 0;
	mb_end(&b);
	CHECK(dcbapp_next_msg(b.buf, b.len, &off, &m, &rep) == 1);
	CHECK(!dcbapp_parse_link(&m, &l, &rep) && l.del && l.ifindex == 5 &&
	      !strcmp(l.ifname, "eth0.100"));
	reports[0] = '\0';
	m.len = NLMSG_HDRLEN + sizeof(ifi) + 8;	/* only IFLA_MTU */
	CHECK(dcbapp_parse_link(&m, &l, &rep) == -1 &&
	      reported("RTM_DELLINK seq 0 ifindex 5: no IFLA_IFNAME"));
}

/* ---- the engine, on a fake cgroup root and sysfs ---- */

static char dir[] = "/tmp/dcbapp-test.XXXXXX";
static char cgroot[64], sysfs[64];
static struct dcbapp_state st;
static char *log_buf;
static size_t log_len;
static FILE *log_fp;
static bool log_json;

static void on_event(void *ctx, const struct dcbapp_event *ev)
{
	(void)ctx;
	/* Outside log_begin() .. log_end() the lines are not looked at. */
	if (ev->kind != DCBAPP_EV_DEBUG && log_fp)
		dcbapp_print_event(log_fp, log_json, ev);
}

static void log_begin(void)
{
	log_fp = open_memstream(&log_buf, &log_len);
}

/* The lines logged since log_begin(); valid until the next log_end(). */
static const char *log_end(void)
{
	static char *last;

	fclose(log_fp);
	log_fp = NULL;
	free(last);
	last = log_buf;
	return last;
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* rm -rf, without a shell. */
static void rm_rf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void rm_rf(const char *fmt, ...)
{
	char path[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_dir(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void make_dir(const char *fmt, ...)
{
	char path[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (mkdir(path, 0755))
		fprintf(stderr, "test_dcbapp: mkdir %s: %s\n", path,
			strerror(errno));
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void add_dev(const char *name, const char *devtype, const char *lower)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/class/net/%s", sysfs, name);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/class/net/%s/uevent", sysfs, name);
	put_file(path, devtype ? devtype : "INTERFACE=x\n");
	if (lower) {
		char target[64];

		snprintf(target, sizeof(target), "../%s", name);
		snprintf(path, sizeof(path), "%s/class/net/%s/upper_%s", sysfs,
			 lower, name);
		if (symlink(target, path))
			fprintf(stderr, "test_dcbapp: %s: %s\n", path,
				strerror(errno));
	}
}

static void fake_begin(bool dry_run)
{
	struct dcbapp_config cfg = {
		.cgroot = cgroot, .sysfs = sysfs, .dry_run = dry_run,
		.fake_cgroupfs = true, .log = on_event,
	};

	rm_rf("%s", cgroot);
	rm_rf("%s", sysfs);
	make_dir("%s", cgroot);
	make_dir("%s", sysfs);
	make_dir("%s/class", sysfs);
	make_dir("%s/class/net", sysfs);
	add_dev("eth0", NULL, NULL);
	add_dev("eth1", NULL, NULL);
	add_dev("eth0.100", "DEVTYPE=vlan\nINTERFACE=eth0.100\n", "eth0");
	add_dev("br0", "DEVTYPE=bridge\n", "eth0");
	dcbapp_init(&st, &cfg);
}

/* What the fake ifpriomap says for dev: its last line; -1 if none. */
static int map_of(const char *cg, const char *dev)
{
	char path[256], name[32];
	unsigned int prio;
	int v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/net_prio.ifpriomap", cgroot, cg);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%31s %u", name, &prio) == 2)
		if (!strcmp(name, dev))
			v = prio;
	fclose(f);
	return v;
}

static int map_lines(const char *cg)
{
	char path[256];
	int n = 0, c;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/net_prio.ifpriomap", cgroot, cg);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static bool cg_exists(const char *cg)
{
	char path[256];
	struct stat s;

	snprintf(path, sizeof(path), "%s/%s", cgroot, cg);
	return !stat(path, &s);
}

static void set_tasks(const char *cg, const char *pids)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s/cgroup.procs", cgroot, cg);
	put_file(path, pids);
}

/* A port's table, as dcbapp_parse_dcb() would leave it. */
static void apply(const char *port, const struct dcbapp_entry *e, int n)
{
	static struct dcbapp_table t;

	memset(&t, 0, sizeof(t));
	snprintf(t.ifname, sizeof(t.ifname), "%s", port);
	t.n = n;
	if (n)
		memcpy(t.e, e, n * sizeof(*e));
	dcbapp_set_table(&st, &t);
	dcbapp_reconcile(&st);
}

static const struct dcbapp_entry roce5 = { 3, 5, 4791 };
#define LINE_ROCE5 "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: " \
	"cgroup cgdcbx-3-4791 ifpriomap eth0 5, eth0.100 5\n"

static void test_new_entry_maps_port_and_vlan_uppers(void)
{
	fake_begin(false);
	log_begin();
	apply("eth0", &roce5, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-3-4791 "
		      "created\n" LINE_ROCE5));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 5);
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 5);
	CHECK(map_of("cgdcbx-3-4791", "br0") == -1);	/* not a VLAN */
	CHECK(map_of("cgdcbx-3-4791", "eth1") == -1);

	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(map_lines("cgdcbx-3-4791") == 2);	/* nothing rewritten */
	CHECK(st.errors == 0);
}

static void test_priority_change_rewrites_the_map(void)
{
	struct dcbapp_entry e = { 3, 6, 4791 };

	fake_begin(false);
	apply("eth0", &roce5, 1);
	log_begin();
	apply("eth0", &e, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "prio 6: cgroup cgdcbx-3-4791 ifpriomap eth0 6, "
		      "eth0.100 6\n"));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 6);
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 6);
}

static void test_removed_entry_without_tasks_removes_the_cgroup(void)
{
	fake_begin(false);
	apply("eth0", &roce5, 1);
	log_begin();
	apply("eth0", NULL, 0);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "gone: cgroup cgdcbx-3-4791 ifpriomap eth0 0, "
		      "eth0.100 0\n"
		      "dcbapp-netprio: cgroup cgdcbx-3-4791 removed\n"));
	CHECK(!cg_exists("cgdcbx-3-4791"));
	CHECK(st.ncgroups == 0);
}

static void test_removed_entry_with_tasks_keeps_cgroup_at_zero(void)
{
	fake_begin(false);
	apply("eth0", &roce5, 1);
	set_tasks("cgdcbx-3-4791", "123\n456\n");
	log_begin();
	apply("eth0", NULL, 0);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "gone: cgroup cgdcbx-3-4791 ifpriomap eth0 0, "
		      "eth0.100 0\n"
		      "dcbapp-netprio: cgroup cgdcbx-3-4791 kept: 2 task(s) "
		      "in it, their traffic falls back to priority 0; "
		      "removed once empty\n"));
	CHECK(cg_exists("cgdcbx-3-4791"));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 0);
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 0);

	log_begin();
	dcbapp_reconcile(&st);		/* the periodic check: still there */
	CHECK(!strcmp(log_end(), ""));

	set_tasks("cgdcbx-3-4791", "");
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-3-4791 "
		      "removed\n"));
	CHECK(!cg_exists("cgdcbx-3-4791"));
}

static void test_entry_back_before_cgroup_empties_reuses_it(void)
{
	fake_begin(false);
	apply("eth0", &roce5, 1);
	set_tasks("cgdcbx-3-4791", "123\n");
	apply("eth0", NULL, 0);
	log_begin();
	apply("eth0", &roce5, 1);
	CHECK(!strcmp(log_end(), LINE_ROCE5));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 5);
}

static void test_two_priorities_for_one_entry_use_the_highest(void)
{
	static const struct dcbapp_entry both[] = { { 3, 4, 4791 },
						    { 3, 5, 4791 } };

	fake_begin(false);
	log_begin();
	apply("eth0", both, 2);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "has priorities 4 5: using the highest, 5\n"
		      "dcbapp-netprio: cgroup cgdcbx-3-4791 created\n"
		      LINE_ROCE5));
	log_begin();
	apply("eth0", both, 1);		/* lldpad deleted the old one */
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "prio 4: cgroup cgdcbx-3-4791 ifpriomap eth0 4, "
		      "eth0.100 4\n"));
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 4);
}

static void test_one_entry_on_two_ports_maps_each_its_own(void)
{
	struct dcbapp_entry e1 = { 3, 2, 4791 };

	fake_begin(false);
	apply("eth0", &roce5, 1);
	log_begin();
	apply("eth1", &e1, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth1: app sel 3 proto 4791 "
		      "prio 2: cgroup cgdcbx-3-4791 ifpriomap eth1 2\n"));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 5);
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 5);
	CHECK(map_of("cgdcbx-3-4791", "eth1") == 2);

	log_begin();
	apply("eth1", NULL, 0);		/* gone on eth1 only */
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth1: app sel 3 proto 4791 "
		      "gone: cgroup cgdcbx-3-4791 ifpriomap eth1 0\n"));
	CHECK(cg_exists("cgdcbx-3-4791"));
	CHECK(map_of("cgdcbx-3-4791", "eth0") == 5);
}

static void test_vlan_created_later_gets_existing_entries(void)
{
	fake_begin(false);
	apply("eth0", &roce5, 1);
	add_dev("eth0.200", "DEVTYPE=vlan\n", "eth0");
	add_dev("eth0.200.7", "DEVTYPE=vlan\n", "eth0.200");	/* QinQ */
	log_begin();
	dcbapp_reconcile(&st);		/* on its RTM_NEWLINK */
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "prio 5: cgroup cgdcbx-3-4791 ifpriomap eth0 5, "
		      "eth0.100 5, eth0.200 5, eth0.200.7 5\n"));
	CHECK(map_of("cgdcbx-3-4791", "eth0.200") == 5);
	CHECK(map_of("cgdcbx-3-4791", "eth0.200.7") == 5);
	CHECK(map_lines("cgdcbx-3-4791") == 4);

	/* Deleted again: nothing to write, the map line died with it. */
	rm_rf("%s/class/net/eth0.200", sysfs);
	rm_rf("%s/class/net/eth0.200.7", sysfs);
	rm_rf("%s/class/net/eth0/upper_eth0.200", sysfs);
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(map_lines("cgdcbx-3-4791") == 4);
	CHECK(st.cgroups[0].ndevs == 2);
}

static void test_invalid_entry_touches_no_cgroup(void)
{
	static struct mb b;
	static const struct dcb_app bad[] = { { 3, 9, 4791 }, { 6, 1, 80 } };

	fake_begin(false);
	apply("eth0", &roce5, 1);
	/* The same pair with priority 9, and an unknown selector. */
	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 7, "eth0", bad, 2);
	CHECK(parse(&b) == DCBAPP_TABLE && table.n == 0 &&
	      table.nfrozen == 2 && nreports == 2);
	log_begin();
	dcbapp_set_table(&st, &table);
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(map_lines("cgdcbx-3-4791") == 2 && !cg_exists("cgdcbx-6-80"));
	CHECK(st.ports[0].n == 1 && st.ports[0].e[0].priority == 5);
}

static void test_dropped_port_is_an_empty_table(void)
{
	fake_begin(false);
	apply("eth0", &roce5, 1);
	rm_rf("%s/class/net/eth0", sysfs);
	rm_rf("%s/class/net/eth0.100", sysfs);
	log_begin();
	dcbapp_drop_port(&st, "eth0");
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "gone: cgroup cgdcbx-3-4791: its devices are gone\n"
		      "dcbapp-netprio: cgroup cgdcbx-3-4791 removed\n"));
	CHECK(st.nports == 0 && !cg_exists("cgdcbx-3-4791"));
}

static void test_dry_run_writes_nothing(void)
{
	fake_begin(true);
	log_begin();
	apply("eth0", &roce5, 1);
	apply("eth0", NULL, 0);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-3-4791 "
		      "created (dry run)\n"
		      "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: "
		      "cgroup cgdcbx-3-4791 ifpriomap eth0 5, eth0.100 5 "
		      "(dry run)\n"
		      "dcbapp-netprio: eth0: app sel 3 proto 4791 gone: "
		      "cgroup cgdcbx-3-4791 ifpriomap eth0 0, eth0.100 0 "
		      "(dry run)\n"
		      "dcbapp-netprio: cgroup cgdcbx-3-4791 removed "
		      "(dry run)\n"));
	CHECK(!cg_exists("cgdcbx-3-4791"));
}

static void test_cgroups_of_an_earlier_run_are_taken_over(void)
{
	char path[256];

	fake_begin(false);
	make_dir("%s/cgdcbx-3-4791", cgroot);
	make_dir("%s/cgdcbx-1-35063", cgroot);
	make_dir("%s/cgdcbx-03-1", cgroot);
	make_dir("%s/other", cgroot);
	snprintf(path, sizeof(path), "%s/cgdcbx-3-4791/net_prio.ifpriomap",
		 cgroot);
	put_file(path, "lo 0\neth0 5\neth0.100 5\neth1 3\n");
	set_tasks("cgdcbx-3-4791", "");
	snprintf(path, sizeof(path), "%s/cgdcbx-1-35063/net_prio.ifpriomap",
		 cgroot);
	put_file(path, "eth0 0\n");
	set_tasks("cgdcbx-1-35063", "");
	dcbapp_adopt(&st);
	CHECK(st.ncgroups == 2);
	log_begin();
	apply("eth0", &roce5, 1);
	/* In readdir order: each line once, and nothing more. */
	const char *log = log_end();
	const char *lines[] = {
		LINE_ROCE5,
		"dcbapp-netprio: app sel 3 proto 4791 gone: cgroup "
		"cgdcbx-3-4791 ifpriomap eth1 0\n",
		"dcbapp-netprio: cgroup cgdcbx-1-35063 removed\n",
	};
	size_t total = 0;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		CHECK(strstr(log, lines[i]));
		total += strlen(lines[i]);
	}
	CHECK(strlen(log) == total);
	CHECK(map_of("cgdcbx-3-4791", "eth1") == 0);
	CHECK(!cg_exists("cgdcbx-1-35063"));
	CHECK(cg_exists("cgdcbx-03-1") && cg_exists("other"));
}

static void test_cleanup_removes_only_empty_cgroups(void)
{
	static const struct dcbapp_entry e[] = { { 3, 5, 4791 },
						 { 5, 3, 46 } };

	fake_begin(false);
	apply("eth0", e, 2);
	set_tasks("cgdcbx-5-46", "99\n");
	log_begin();
	dcbapp_cleanup(&st);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-3-4791 "
		      "removed\n"));
	CHECK(!cg_exists("cgdcbx-3-4791") && cg_exists("cgdcbx-5-46"));
}

static void test_json_log_line_is_one_object(void)
{
	fake_begin(false);
	log_json = true;
	log_begin();
	apply("eth0", &roce5, 1);
	CHECK(!strcmp(log_end(), "{\"event\":\"created\",\"cgroup\":"
		      "\"cgdcbx-3-4791\"}\n"
		      "{\"event\":\"app\",\"port\":\"eth0\",\"selector\":3,"
		      "\"protocol\":4791,\"priority\":5,\"cgroup\":"
		      "\"cgdcbx-3-4791\",\"ifpriomap\":[{\"dev\":\"eth0\","
		      "\"prio\":5},{\"dev\":\"eth0.100\",\"prio\":5}]}\n"));
	log_json = false;
}

static void test_state_printout_lists_ports_and_cgroups(void)
{
	char *buf = NULL;
	size_t len;
	FILE *f;

	fake_begin(false);
	apply("eth0", &roce5, 1);
	f = open_memstream(&buf, &len);
	dcbapp_print_state(f, true, &st);
	fclose(f);
	CHECK(!strcmp(buf, "{\"ports\":[{\"port\":\"eth0\",\"app\":[{"
		      "\"selector\":3,\"protocol\":4791,\"priority\":5}]}],"
		      "\"cgroups\":[{\"cgroup\":\"cgdcbx-3-4791\","
		      "\"selector\":3,\"protocol\":4791,\"ifpriomap\":[{"
		      "\"dev\":\"eth0\",\"prio\":5},{\"dev\":\"eth0.100\","
		      "\"prio\":5}]}]}\n"));
	free(buf);
}

/* ---- DSCP and port entries: the nft scripts the engine hands its runner */

/* The fake nft: every script it was given, and what it answers. */
static struct {
	int runs;
	char last[8192];
	const char *fail;	/* why[] to fail with; NULL: exit 0 */
} nft;

static int fake_nft(void *ctx, const char *script, char *why, size_t whysz)
{
	(void)ctx;
	nft.runs++;
	snprintf(nft.last, sizeof(nft.last), "%s", script);
	if (!nft.fail)
		return 0;
	snprintf(why, whysz, "%s", nft.fail);
	return -1;
}

/* fake_begin(), and the engine runs the fake nft. */
static void nft_begin(bool dry_run)
{
	fake_begin(dry_run);
	st.cfg.nft = fake_nft;
	memset(&nft, 0, sizeof(nft));
}

/* The port's table as lldpad's DCB_CMD_IEEE_SET leaves it, parsed. */
static void apply_msg(const char *port, const struct dcb_app *apps, int n)
{
	static struct mb b;

	b.len = 0;
	mb_ieee(&b, RTM_SETDCB, DCB_CMD_IEEE_SET, 11, port, apps, n);
	CHECK(parse(&b) == DCBAPP_TABLE && table.n == n);
	dcbapp_set_table(&st, &table);
	dcbapp_reconcile(&st);
}

static const struct dcb_app af31_3 = { IEEE_8021QAZ_APP_SEL_DSCP, 3, 26 };
static const struct dcb_app roce_3 = { IEEE_8021QAZ_APP_SEL_DGRAM, 3, 4791 };
static const struct dcb_app fcoe_4 = { IEEE_8021QAZ_APP_SEL_ETHERTYPE, 4,
				       0x8906 };

#define NFT_HEAD "table inet dcbapp {}\n" \
	"flush table inet dcbapp\n" \
	"table inet dcbapp {\n" \
	"\tchain output {\n" \
	"\t\ttype filter hook output priority 0; policy accept;\n"
#define NFT_TAIL "\t}\n}\n"
#define NFT_RULES(dev, dscp, prio) \
	"\t\toifname \"" dev "\" ip dscp " dscp " meta priority none " \
	"counter meta priority set 0:" prio "\n" \
	"\t\toifname \"" dev "\" ip6 dscp " dscp " meta priority none " \
	"counter meta priority set 0:" prio "\n"
/* l4: "{ udp, dccp }" and the like */
#define NFT_PORT_RULE(dev, l4, port, prio) \
	"\t\toifname \"" dev "\" meta l4proto " l4 " th dport " port \
	" meta priority none counter meta priority set 0:" prio "\n"
#define NFT_DELETE "table inet dcbapp {}\ndelete table inet dcbapp\n"
#define LINE_AF31_3 "dcbapp-netprio: eth0: app sel 5 proto 26 prio 3: " \
	"nft dscp 26 priority 3 on eth0, eth0.100\n"

static void test_dscp_entry_gives_port_and_vlans_an_nft_rule(void)
{
	nft_begin(false);
	log_begin();
	apply_msg("eth0", &af31_3, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-5-26 "
		      "created\n"
		      "dcbapp-netprio: eth0: app sel 5 proto 26 prio 3: "
		      "cgroup cgdcbx-5-26 ifpriomap eth0 3, eth0.100 3\n"
		      LINE_AF31_3));
	CHECK(nft.runs == 1);
	CHECK(!strcmp(nft.last,
		      "table inet dcbapp {}\n"
		      "flush table inet dcbapp\n"
		      "table inet dcbapp {\n"
		      "\tchain output {\n"
		      "\t\ttype filter hook output priority 0; "
		      "policy accept;\n"
		      "\t\toifname \"eth0\" ip dscp 26 meta priority none "
		      "counter meta priority set 0:3\n"
		      "\t\toifname \"eth0\" ip6 dscp 26 meta priority none "
		      "counter meta priority set 0:3\n"
		      "\t\toifname \"eth0.100\" ip dscp 26 meta priority none "
		      "counter meta priority set 0:3\n"
		      "\t\toifname \"eth0.100\" ip6 dscp 26 meta priority "
		      "none counter meta priority set 0:3\n"
		      "\t}\n"
		      "}\n"));
	/* The cgroup is made as for any entry. */
	CHECK(map_of("cgdcbx-5-26", "eth0.100") == 3);
	CHECK(st.nrules == 2 && st.errors == 0);
}

/*
 * The lab's captured reply holds dscp-prio 46:6 and dgram-port-prio 4791:5
 * beside an ethertype entry, which gets no rule; priority 6 goes first.
 */
static void test_captured_reply_gives_its_dscp_and_port_entry_rules(void)
{
	static struct mb b;

	nft_begin(false);
	b.len = unhex(captured_get, b.buf);
	CHECK(parse(&b) == DCBAPP_TABLE && table.n == 3);
	dcbapp_set_table(&st, &table);
	dcbapp_reconcile(&st);
	CHECK(nft.runs == 1);
	CHECK(!strcmp(nft.last, NFT_HEAD NFT_RULES("eth0", "46", "6")
		      NFT_RULES("eth0.100", "46", "6")
		      NFT_PORT_RULE("eth0", "{ udp, dccp }", "4791", "5")
		      NFT_PORT_RULE("eth0.100", "{ udp, dccp }", "4791", "5")
		      NFT_TAIL));
	CHECK(st.nrules == 4);
}

static void test_dscp_entry_with_two_priorities_uses_the_highest(void)
{
	static const struct dcb_app both[] = { { 5, 2, 26 }, { 5, 3, 26 } };

	nft_begin(false);
	log_begin();
	apply_msg("eth0", both, 2);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 5 proto 26 "
		     "has priorities 2 3: using the highest, 3\n"));
	CHECK(!strcmp(nft.last, NFT_HEAD NFT_RULES("eth0", "26", "3")
		      NFT_RULES("eth0.100", "26", "3") NFT_TAIL));
}

static void test_removed_dscp_entry_removes_its_rules(void)
{
	static const struct dcb_app two_dscp[] = { { 5, 3, 26 },
						   { 5, 6, 46 } };

	nft_begin(false);
	apply_msg("eth0", two_dscp, 2);
	CHECK(nft.runs == 1);
	log_begin();
	apply_msg("eth0", &two_dscp[1], 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 5 proto 26 "
		     "gone: nft dscp 26 rule removed on eth0, eth0.100\n"));
	CHECK(nft.runs == 2);
	CHECK(!strcmp(nft.last, NFT_HEAD NFT_RULES("eth0", "46", "6")
		      NFT_RULES("eth0.100", "46", "6") NFT_TAIL));
	/* The last one: the table goes. */
	apply_msg("eth0", NULL, 0);
	CHECK(nft.runs == 3 && !strcmp(nft.last, NFT_DELETE));
	CHECK(st.nrules == 0);
}

static void test_reconcile_with_nothing_changed_runs_no_nft(void)
{
	nft_begin(false);
	apply_msg("eth0", &af31_3, 1);
	log_begin();
	dcbapp_reconcile(&st);
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(nft.runs == 1);
	/* Nor does a change of an entry no rule is made of. */
	apply_msg("eth0", (struct dcb_app[]){ af31_3, fcoe_4 }, 2);
	CHECK(nft.runs == 1);
}

/* Ethertype entries reach no IP hook: cgroups only, nft never runs. */
static void test_ethertype_entries_run_no_nft(void)
{
	nft_begin(false);
	log_begin();
	apply_msg("eth0", &fcoe_4, 1);
	CHECK(!strstr(log_end(), "nft"));
	CHECK(cg_exists("cgdcbx-1-35078"));
	CHECK(nft.runs == 0 && st.nrules == 0);
	apply_msg("eth0", NULL, 0);
	CHECK(nft.runs == 0);
}

static void test_failed_nft_is_an_error_and_retried(void)
{
	nft_begin(false);
	nft.fail = "/usr/sbin/nft -f -: exit status 1: /dev/stdin:6:3-8: "
		   "Error: Could not process rule: No such file or directory";
	log_begin();
	apply_msg("eth0", &af31_3, 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: nft table inet dcbapp: "
		     "/usr/sbin/nft -f -: exit status 1: /dev/stdin:6:3-8: "
		     "Error: Could not process rule: No such file or "
		     "directory: rules not changed; will retry\n"));
	CHECK(nft.runs == 1 && st.errors == 1 && st.nrules == 0);
	/* Retried, counted, but the same line is not logged again. */
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(nft.runs == 2 && st.errors == 2);
	/* nft works again: applied, the change logged once. */
	nft.fail = NULL;
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), LINE_AF31_3));
	CHECK(nft.runs == 3 && st.errors == 2 && st.nrules == 2);
	dcbapp_reconcile(&st);
	CHECK(nft.runs == 3);
}

static void test_dscp_dry_run_runs_no_nft(void)
{
	nft_begin(true);
	log_begin();
	apply_msg("eth0", &af31_3, 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 5 proto 26 "
		     "prio 3: nft dscp 26 priority 3 on eth0, eth0.100 "
		     "(dry run)\n"));
	log_begin();
	dcbapp_cleanup(&st);
	CHECK(strstr(log_end(), "dcbapp-netprio: nft table inet dcbapp "
		     "removed (dry run)\n"));
	CHECK(nft.runs == 0 && st.errors == 0);
}

static void test_vlan_created_later_gets_the_dscp_rule(void)
{
	nft_begin(false);
	apply_msg("eth0", &af31_3, 1);
	add_dev("eth0.200", "DEVTYPE=vlan\n", "eth0");
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 5 proto 26 "
		     "prio 3: nft dscp 26 priority 3 on eth0, eth0.100, "
		     "eth0.200\n"));
	CHECK(nft.runs == 2 && !strcmp(nft.last, NFT_HEAD
		      NFT_RULES("eth0", "26", "3")
		      NFT_RULES("eth0.100", "26", "3")
		      NFT_RULES("eth0.200", "26", "3") NFT_TAIL));
	/* Deleted again: its rule goes, the entry stays, no line. */
	rm_rf("%s/class/net/eth0.200", sysfs);
	rm_rf("%s/class/net/eth0/upper_eth0.200", sysfs);
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), ""));
	CHECK(nft.runs == 3 && st.nrules == 2);
}

/* A quote would end nft's string: such a device gets no rule, said once. */
static void test_device_name_nft_cannot_quote_gets_no_rule(void)
{
	nft_begin(false);
	add_dev("eth0.\"x", "DEVTYPE=vlan\n", "eth0");
	log_begin();
	apply_msg("eth0", &af31_3, 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 5 proto 26: "
		     "device 'eth0.\"x': its name is not one nft takes in "
		     "quotes as it is: no nft rule on it\n"));
	CHECK(st.errors == 1 && !strstr(nft.last, "\"x"));
	CHECK(!strcmp(nft.last, NFT_HEAD NFT_RULES("eth0", "26", "3")
		      NFT_RULES("eth0.100", "26", "3") NFT_TAIL));
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(!strcmp(log_end(), "") && nft.runs == 1);
}

static void test_cleanup_deletes_the_nft_table(void)
{
	nft_begin(false);
	apply_msg("eth0", &af31_3, 1);
	log_begin();
	dcbapp_cleanup(&st);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-5-26 "
		      "removed\n"
		      "dcbapp-netprio: nft table inet dcbapp removed\n"));
	CHECK(nft.runs == 2 && !strcmp(nft.last, NFT_DELETE));
	dcbapp_cleanup(&st);
	CHECK(nft.runs == 2);
	/* A run that never made the table does not run nft to delete it. */
	nft_begin(false);
	apply_msg("eth0", &fcoe_4, 1);
	dcbapp_cleanup(&st);
	CHECK(nft.runs == 0);
}

/* app on eth0 (and eth0.100), then gone: one JSON object each; log_json
 * is left on. */
static void check_rule_json_events(const struct dcb_app *app)
{
	char want[256];

	nft_begin(false);
	log_json = true;
	log_begin();
	apply_msg("eth0", app, 1);
	snprintf(want, sizeof(want), "\n{\"event\":\"nft_rule\",\"port\":"
		 "\"eth0\",\"selector\":%u,\"protocol\":%u,\"priority\":%u,"
		 "\"devs\":[\"eth0\",\"eth0.100\"]}\n", app->selector,
		 app->protocol, app->priority);
	CHECK(strstr(log_end(), want));
	log_begin();
	apply_msg("eth0", NULL, 0);
	snprintf(want, sizeof(want), "\n{\"event\":\"nft_rule_gone\","
		 "\"port\":\"eth0\",\"selector\":%u,\"protocol\":%u,"
		 "\"devs\":[\"eth0\",\"eth0.100\"]}\n", app->selector,
		 app->protocol);
	CHECK(strstr(log_end(), want));
}

static void test_dscp_json_events_are_one_object_each(void)
{
	check_rule_json_events(&af31_3);
	apply_msg("eth0", &af31_3, 1);
	log_begin();
	dcbapp_cleanup(&st);
	CHECK(strstr(log_end(), "{\"event\":\"nft_removed\",\"table\":"
		     "\"inet dcbapp\"}\n"));
	log_json = false;
}

static void test_state_printout_lists_the_nft_rules(void)
{
	char *buf = NULL;
	size_t len;
	FILE *f;

	nft_begin(false);
	apply_msg("eth0", (struct dcb_app[]){ af31_3, roce_3 }, 2);
	f = open_memstream(&buf, &len);
	dcbapp_print_state(f, true, &st);
	fclose(f);
	CHECK(strstr(buf, "]}],\"nft_rules\":[{\"dev\":\"eth0\",\"selector\":3,"
		     "\"protocol\":4791,\"priority\":3,\"port\":\"eth0\"},"
		     "{\"dev\":\"eth0\",\"selector\":5,\"protocol\":26,"
		     "\"priority\":3,\"port\":\"eth0\"},{\"dev\":\"eth0.100\","
		     "\"selector\":3,\"protocol\":4791,\"priority\":3,"
		     "\"port\":\"eth0\"},{\"dev\":\"eth0.100\",\"selector\":5,"
		     "\"protocol\":26,\"priority\":3,\"port\":\"eth0\"}]}\n"));
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	dcbapp_print_state(f, false, &st);
	fclose(f);
	CHECK(strstr(buf, "\nnft oifname eth0 udp/dccp dport 4791 priority 3 "
		     "(port eth0)\n"
		     "nft oifname eth0 dscp 26 priority 3 (port eth0)\n"
		     "nft oifname eth0.100 udp/dccp dport 4791 priority 3 "
		     "(port eth0)\n"
		     "nft oifname eth0.100 dscp 26 priority 3 (port eth0)\n"));
	free(buf);
}

/* ---- port entries (selectors 2, 3, 4): rules on the destination port */

#define LINE_ROCE_3 "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 3: " \
	"nft udp/dccp dport 4791 priority 3 on eth0, eth0.100\n"
#define ROCE_RULES(prio) \
	NFT_PORT_RULE("eth0", "{ udp, dccp }", "4791", prio) \
	NFT_PORT_RULE("eth0.100", "{ udp, dccp }", "4791", prio)

/* What every RoCE guide installs: all of RoCEv2 goes to UDP 4791. */
static void test_dgram_port_entry_gives_port_and_vlans_an_nft_rule(void)
{
	nft_begin(false);
	log_begin();
	apply_msg("eth0", &roce_3, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: cgroup cgdcbx-3-4791 "
		      "created\n"
		      "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 3: "
		      "cgroup cgdcbx-3-4791 ifpriomap eth0 3, eth0.100 3\n"
		      LINE_ROCE_3));
	CHECK(nft.runs == 1);
	/* one line per device (the DSCP test above spells the script out) */
	CHECK(!strcmp(nft.last, NFT_HEAD ROCE_RULES("3") NFT_TAIL));
	/* The cgroup is made as for any entry: tasks can still join it. */
	CHECK(map_of("cgdcbx-3-4791", "eth0.100") == 3);
	CHECK(st.nrules == 2 && st.errors == 0);
}

/* Selector 2 is TCP or SCTP, 4 any of TCP, UDP, SCTP, DCCP. */
static void test_stream_and_any_port_entries_match_their_protocols(void)
{
	static const struct dcb_app e[] = {
		{ IEEE_8021QAZ_APP_SEL_STREAM, 2, 3260 },	/* iSCSI */
		{ IEEE_8021QAZ_APP_SEL_ANY, 2, 2049 },		/* NFS */
	};

	nft_begin(false);
	log_begin();
	apply_msg("eth0", e, 2);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 2 proto 3260 "
		     "prio 2: nft tcp/sctp dport 3260 priority 2 on eth0, "
		     "eth0.100\n"
		     "dcbapp-netprio: eth0: app sel 4 proto 2049 prio 2: nft "
		     "tcp/udp/sctp/dccp dport 2049 priority 2 on eth0, "
		     "eth0.100\n"));
	CHECK(!strcmp(nft.last, NFT_HEAD
		      NFT_PORT_RULE("eth0", "{ tcp, sctp }", "3260", "2")
		      NFT_PORT_RULE("eth0", "{ tcp, udp, sctp, dccp }", "2049",
				    "2")
		      NFT_PORT_RULE("eth0.100", "{ tcp, sctp }", "3260", "2")
		      NFT_PORT_RULE("eth0.100", "{ tcp, udp, sctp, dccp }",
				    "2049", "2") NFT_TAIL));
}

static void test_port_entry_with_two_priorities_uses_the_highest(void)
{
	static const struct dcb_app both[] = { { 3, 3, 4791 }, { 3, 5, 4791 } };

	nft_begin(false);
	apply_msg("eth0", both, 2);
	CHECK(nft.runs == 1 && st.nrules == 2);
	CHECK(!strcmp(nft.last, NFT_HEAD ROCE_RULES("5") NFT_TAIL));
}

/*
 * Lab 9's sequence: 4791:5, then 4791:3 beside it (the highest, 5, stays:
 * no nft), then 5 withdrawn: the rules go to 3, one line.
 */
static void test_port_entry_priority_change_rewrites_its_rules(void)
{
	static const struct dcb_app five = { 3, 5, 4791 };

	nft_begin(false);
	apply_msg("eth0", &five, 1);
	apply_msg("eth0", (struct dcb_app[]){ five, roce_3 }, 2);
	CHECK(nft.runs == 1);
	log_begin();
	apply_msg("eth0", &roce_3, 1);
	CHECK(!strcmp(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		      "prio 3: cgroup cgdcbx-3-4791 ifpriomap eth0 3, "
		      "eth0.100 3\n" LINE_ROCE_3));
	CHECK(nft.runs == 2);
	CHECK(!strcmp(nft.last, NFT_HEAD ROCE_RULES("3") NFT_TAIL));
}

static void test_removed_port_entry_removes_its_rules(void)
{
	nft_begin(false);
	apply_msg("eth0", (struct dcb_app[]){ af31_3, roce_3 }, 2);
	CHECK(nft.runs == 1 && st.nrules == 4);
	log_begin();
	apply_msg("eth0", &af31_3, 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		     "gone: nft udp/dccp dport 4791 rule removed on eth0, "
		     "eth0.100\n"));
	CHECK(nft.runs == 2 && st.nrules == 2);
	CHECK(!strcmp(nft.last, NFT_HEAD NFT_RULES("eth0", "26", "3")
		      NFT_RULES("eth0.100", "26", "3") NFT_TAIL));
	/* The DSCP entry goes too: the table goes. */
	apply_msg("eth0", NULL, 0);
	CHECK(nft.runs == 3 && !strcmp(nft.last, NFT_DELETE));
	CHECK(st.nrules == 0);
}

/*
 * A packet several entries name (here: DSCP 26 to UDP 4791, or UDP 4791
 * under selectors 3 and 4) takes the first rule it meets, the others see
 * a priority set: the rules go highest priority first, so it gets the
 * highest, as several priorities of one entry do.
 */
static void test_rules_go_highest_priority_first(void)
{
	static const struct dcb_app e[] = {
		{ IEEE_8021QAZ_APP_SEL_DSCP, 3, 26 },
		{ IEEE_8021QAZ_APP_SEL_ANY, 6, 4791 },
		{ IEEE_8021QAZ_APP_SEL_DGRAM, 5, 4791 },
		{ IEEE_8021QAZ_APP_SEL_DSCP, 7, 46 },
	};

	nft_begin(false);
	apply_msg("eth0", e, 4);
	CHECK(st.nrules == 8);
	CHECK(!strcmp(nft.last, NFT_HEAD
		      NFT_RULES("eth0", "46", "7")
		      NFT_RULES("eth0.100", "46", "7")
		      NFT_PORT_RULE("eth0", "{ tcp, udp, sctp, dccp }", "4791",
				    "6")
		      NFT_PORT_RULE("eth0.100", "{ tcp, udp, sctp, dccp }",
				    "4791", "6")
		      ROCE_RULES("5")
		      NFT_RULES("eth0", "26", "3")
		      NFT_RULES("eth0.100", "26", "3") NFT_TAIL));
}

/* Each port's devices get that port's priority for the entry. */
static void test_port_entry_on_two_ports_gives_each_its_own(void)
{
	nft_begin(false);
	apply_msg("eth0", &roce_3, 1);
	log_begin();
	apply_msg("eth1", (struct dcb_app[]){ { 3, 6, 4791 } }, 1);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth1: app sel 3 proto 4791 "
		     "prio 6: nft udp/dccp dport 4791 priority 6 on eth1\n"));
	CHECK(nft.runs == 2 && !strcmp(nft.last, NFT_HEAD
		      NFT_PORT_RULE("eth1", "{ udp, dccp }", "4791", "6")
		      ROCE_RULES("3") NFT_TAIL));
}

/* A VLAN device that comes later gets the port entry's rule too. */
static void test_vlan_created_later_gets_the_port_rule(void)
{
	nft_begin(false);
	apply_msg("eth0", &roce_3, 1);
	add_dev("eth0.200", "DEVTYPE=vlan\n", "eth0");
	log_begin();
	dcbapp_reconcile(&st);
	CHECK(strstr(log_end(), "dcbapp-netprio: eth0: app sel 3 proto 4791 "
		     "prio 3: nft udp/dccp dport 4791 priority 3 on eth0, "
		     "eth0.100, eth0.200\n"));
	CHECK(nft.runs == 2 && strstr(nft.last, NFT_PORT_RULE("eth0.200",
		      "{ udp, dccp }", "4791", "3")));
}

static void test_port_rule_json_events_are_one_object_each(void)
{
	check_rule_json_events(&roce_3);
	log_json = false;
}

/* More rules than DCBAPP_MAX_RULES: the rest are left out, said once. */
static void test_rules_beyond_the_limit_are_left_out_and_logged(void)
{
	static struct dcbapp_entry e[DCBAPP_MAX_CGROUPS];
	char want[128];
	int over;

	nft_begin(false);
	for (int v = 1; v <= 8; v++) {
		char name[16];

		snprintf(name, sizeof(name), "eth0.%d", v);
		add_dev(name, "DEVTYPE=vlan\n", "eth0");
	}
	/* As many entries as there may be cgroups, on 10 devices. */
	for (int i = 0; i < DCBAPP_MAX_CGROUPS; i++)
		e[i] = (struct dcbapp_entry){ IEEE_8021QAZ_APP_SEL_DGRAM, 1,
					      10000 + i };
	over = 10 * DCBAPP_MAX_CGROUPS - DCBAPP_MAX_RULES;
	snprintf(want, sizeof(want), "dcbapp-netprio: more than %d nft rules "
		 "(device, entry): %d left out\n", DCBAPP_MAX_RULES, over);
	log_begin();
	apply("eth0", e, DCBAPP_MAX_CGROUPS);
	CHECK(strstr(log_end(), want));
	CHECK(st.nrules == DCBAPP_MAX_RULES && nft.runs == 1);
	CHECK(st.errors == 1);
	log_begin();
	dcbapp_reconcile(&st);		/* the same note: not logged again */
	CHECK(!strstr(log_end(), "left out") && nft.runs == 1);
}

/* dcbapp_nft_exec() on a stand-in nft: a shell script in our tmp dir. */
static void test_nft_exec_feeds_stdin_and_reports_status(void)
{
	static const char script[] = NFT_HEAD NFT_RULES("eth0", "26", "3")
		NFT_TAIL;
	char fake[128], in[128], text[512], why[256], want[512];
	FILE *f;
	size_t n;

	snprintf(fake, sizeof(fake), "%s/fake-nft", dir);
	snprintf(in, sizeof(in), "%s/fake-nft.in", dir);
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n"
		 "{ echo \"$*\"; cat; } > %s\n"
		 "echo this goes to /dev/null\n"
		 "grep -q fail %s || exit 0\n"
		 "echo '/dev/stdin:1:1-4: Error: syntax error' >&2\n"
		 "echo 'fail' >&2\n"
		 "exit 1\n", in, in);
	put_file(fake, text);
	chmod(fake, 0755);

	CHECK(dcbapp_nft_exec(fake, script, why, sizeof(why)) == 0);
	f = fopen(in, "r");
	n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	CHECK(!strncmp(text, "-f -\n", 5) && !strcmp(text + 5, script));

	CHECK(dcbapp_nft_exec(fake, "fail\n", why, sizeof(why)) == -1);
	snprintf(want, sizeof(want), "%s -f -: exit status 1: /dev/stdin:"
		 "1:1-4: Error: syntax error", fake);
	CHECK(!strcmp(why, want));

	CHECK(dcbapp_nft_exec("/nonexistent/nft", script, why,
			      sizeof(why)) == -1);
	CHECK(!strcmp(why, "/nonexistent/nft -f -: exit status 127: cannot "
		      "run /nonexistent/nft: No such file or directory "
		      "(install nftables, or give --nft PATH)"));
}

static void test_nft_script_of_no_rule_deletes_the_table(void)
{
	char buf[64];

	CHECK(dcbapp_nft_script(buf, sizeof(buf), NULL, 0) ==
	      strlen(NFT_DELETE) && !strcmp(buf, NFT_DELETE));
	/* Too small: the length it needs, and a terminated prefix. */
	CHECK(dcbapp_nft_script(buf, 10, NULL, 0) == strlen(NFT_DELETE) &&
	      strlen(buf) == 9);
}

/* ---- the binary's command line ---- */

/* Exit status of tool argv..., its stdout+stderr in out. */
static int run_tool(char *out, size_t size, char *const argv[])
{
	int pipefd[2], status;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (!pid) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	while (n < size - 1 && (r = read(pipefd[0], out + n, size - 1 - n)) > 0)
		n += r;
	out[n] = '\0';
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_command_line(const char *tool)
{
	static char out[8192];
	char missing[96];

	snprintf(missing, sizeof(missing), "%s/no-such-dir", dir);
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "-h",
						     NULL }) == 0);
	CHECK(strstr(out, "cgdcbx-SELECTOR-PROTOCOL") &&
	      strstr(out, "falls back to priority 0") &&
	      strstr(out, "--cgroup-root"));
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "--bogus",
						     NULL }) == 2);
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "--dev",
						     "a/b", NULL }) == 2);
	CHECK(strstr(out, "--dev 'a/b' is not a device name"));
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "x",
						     NULL }) == 2);
	/* Stops before it opens a socket: the host's netlink stays alone. */
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "--once",
			"--cgroup-root", missing, NULL }) == 1);
	CHECK(strstr(out, "not a directory"));
}

static void test_nft_option_on_the_command_line(const char *tool)
{
	static char out[8192];

	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "-h",
						     NULL }) == 0);
	CHECK(strstr(out, "--nft PATH") && strstr(out, "table inet dcbapp"));
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "--nft=",
						     NULL }) == 2);
	CHECK(strstr(out, "--nft needs the path of the nft program"));
	CHECK(run_tool(out, sizeof(out), (char *[]){ (char *)tool, "--nft",
						     NULL }) == 2);
}

/*
 * The whole daemon once, in a network namespace of its own (nothing of
 * the host's is touched): lo has no dcbnl, so no table and no cgroup.
 */
static void test_once_in_a_private_netns_finds_no_table(const char *tool)
{
	static char out[4096];
	char sys[96], cg[96];
	int pipefd[2], status;
	ssize_t n = 0, r;
	pid_t pid;

	snprintf(sys, sizeof(sys), "%s/sys", dir);
	snprintf(cg, sizeof(cg), "%s/cg", dir);
	fake_begin(false);
	add_dev("lo", NULL, NULL);
	if (pipe(pipefd))
		return;
	pid = fork();
	if (!pid) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET))
			_exit(77);
		/* --nft: whatever happens, never the host's nft. */
		execl(tool, tool, "--once", "-j", "--dev", "lo", "--sysfs",
		      sys, "--cgroup-root", cg, "--nft", "/nonexistent/nft",
		      (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	while (n < (ssize_t)sizeof(out) - 1 &&
	       (r = read(pipefd[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += r;
	out[n] = '\0';
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("test_dcbapp: skipped the private-netns run: no user "
		       "namespaces here\n");
		return;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!strcmp(out, "{\"ports\":[],\"cgroups\":[]}\n"));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_dcbapp OUT/dcbapp-netprio\n");
		return 2;
	}
	progname = "dcbapp-netprio";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(cgroot, sizeof(cgroot), "%s/cg", dir);
	snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);

	test_notification_of_ieee_set_is_a_table();
	test_reply_to_ieee_get_is_a_table();
	test_captured_reply_from_the_lab_is_the_table();
	test_ieee_del_leaving_no_entry_is_an_empty_table();
	test_peer_app_entries_are_not_the_table();
	test_cee_message_is_not_an_ieee_table();
	test_duplicate_entries_count_once();
	test_two_messages_in_one_datagram_are_both_read();
	test_truncated_nlmsghdr_drops_the_rest();
	test_message_too_short_for_dcbmsg_is_ignored();
	test_nla_len_beyond_message_is_malformed();
	test_nla_len_below_header_is_malformed_at_each_level();
	test_nest_longer_than_its_parent_is_malformed();
	test_stray_bytes_after_attributes_are_malformed();
	test_app_with_wrong_payload_size_ignores_the_message();
	test_unknown_selectors_are_skipped();
	test_priority_above_seven_is_skipped();
	test_dscp_above_63_is_skipped();
	test_oversized_tables_are_malformed();
	test_bad_ifname_ignores_the_message();
	test_missing_attributes_ignore_the_message();
	test_cut_and_corrupted_messages_never_yield_bad_entries();
	test_ieee_get_request_is_what_dcb_doit_wants();
	test_error_answer_gives_errno_and_request_seq();
	test_link_messages_give_name_and_kind();

	test_new_entry_maps_port_and_vlan_uppers();
	test_priority_change_rewrites_the_map();
	test_removed_entry_without_tasks_removes_the_cgroup();
	test_removed_entry_with_tasks_keeps_cgroup_at_zero();
	test_entry_back_before_cgroup_empties_reuses_it();
	test_two_priorities_for_one_entry_use_the_highest();
	test_one_entry_on_two_ports_maps_each_its_own();
	test_vlan_created_later_gets_existing_entries();
	test_invalid_entry_touches_no_cgroup();
	test_dropped_port_is_an_empty_table();
	test_dry_run_writes_nothing();
	test_cgroups_of_an_earlier_run_are_taken_over();
	test_cleanup_removes_only_empty_cgroups();
	test_json_log_line_is_one_object();
	test_state_printout_lists_ports_and_cgroups();

	test_dscp_entry_gives_port_and_vlans_an_nft_rule();
	test_captured_reply_gives_its_dscp_and_port_entry_rules();
	test_dscp_entry_with_two_priorities_uses_the_highest();
	test_removed_dscp_entry_removes_its_rules();
	test_reconcile_with_nothing_changed_runs_no_nft();
	test_ethertype_entries_run_no_nft();
	test_failed_nft_is_an_error_and_retried();
	test_dscp_dry_run_runs_no_nft();
	test_vlan_created_later_gets_the_dscp_rule();
	test_device_name_nft_cannot_quote_gets_no_rule();
	test_cleanup_deletes_the_nft_table();
	test_dscp_json_events_are_one_object_each();
	test_state_printout_lists_the_nft_rules();
	test_dgram_port_entry_gives_port_and_vlans_an_nft_rule();
	test_stream_and_any_port_entries_match_their_protocols();
	test_port_entry_with_two_priorities_uses_the_highest();
	test_port_entry_priority_change_rewrites_its_rules();
	test_removed_port_entry_removes_its_rules();
	test_rules_go_highest_priority_first();
	test_port_entry_on_two_ports_gives_each_its_own();
	test_vlan_created_later_gets_the_port_rule();
	test_port_rule_json_events_are_one_object_each();
	test_rules_beyond_the_limit_are_left_out_and_logged();
	test_nft_exec_feeds_stdin_and_reports_status();
	test_nft_script_of_no_rule_deletes_the_table();

	test_command_line(argv[1]);
	test_nft_option_on_the_command_line(argv[1]);
	test_once_in_a_private_netns_finds_no_table(argv[1]);

	rm_rf("%s", dir);
	printf("dcbapp: %d passed, %d failed\n", checks_passed, checks_failed);
	return checks_failed ? 1 : 0;
}
