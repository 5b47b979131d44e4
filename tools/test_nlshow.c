// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of nlshow.c: the lines nldump prints for built RTM_NEWQDISC and
 * NFT_MSG_NEWTABLE messages, in the notation of the tools whose output
 * guest-image/restore parsed before (tc 6.1, nft 1.0.6).  The guest run
 * (tests/test_lab.py, test_nldump_lists_qdiscs_and_tables_as_tc_and_nft_do)
 * holds nldump's lines to tc's and nft's own for the same kernel state.
 */
#include "check.h"
#include "nlshow.h"
#include "rtnl.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

int checks_passed, checks_failed;

static const struct nlmsghdr *qdisc_msg(struct rtnl_msg *m, const char *kind,
					int ifindex, uint32_t handle,
					uint32_t parent)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
			   .tcm_handle = handle, .tcm_parent = parent };

	rtnl_msg_init(m, RTM_NEWQDISC, 0, &t, sizeof(t));
	if (kind)
		rtnl_msg_put_str(m, TCA_KIND, kind);
	return (const struct nlmsghdr *)m->buf;
}

static const char *qline(const char *kind, uint32_t handle, uint32_t parent,
			 const char *dev)
{
	static char line[128];
	struct nlshow_qdisc q;
	struct rtnl_msg m;

	if (nlshow_qdisc(qdisc_msg(&m, kind, 2, handle, parent), &q))
		return "(not a qdisc)";
	nlshow_qdisc_line(&q, dev, line, sizeof(line));
	return line;
}

static const char long_kind[] = "a-kind-name-of-more-than-32-bytes";

static void test_qdiscs(void)
{
	struct nlshow_qdisc q;
	struct rtnl_msg m;

	/* tc's notation: the handle's major and a colon; the parent "root",
	 * or MAJ:MIN with an empty major or minor left out.
	 */
	CHECK(!strcmp(qline("mq", 0, TC_H_ROOT, "eth0"),
		      "qdisc mq 0: dev eth0 root"));
	CHECK(!strcmp(qline("pfifo_fast", 0, TC_H_MAKE(0, 1), "eth0"),
		      "qdisc pfifo_fast 0: dev eth0 parent :1"));
	CHECK(!strcmp(qline("noqueue", 0, TC_H_ROOT, "lo"),
		      "qdisc noqueue 0: dev lo root"));
	CHECK(!strcmp(qline("clsact", 0xffff0000, TC_H_CLSACT, "eth0"),
		      "qdisc clsact ffff: dev eth0 parent ffff:fff1"));
	CHECK(!strcmp(qline("ets", 0x10000, TC_H_ROOT, "swp3"),
		      "qdisc ets 1: dev swp3 root"));
	CHECK(!strcmp(qline("tbf", 0x80010000, 0x10004, "swp3"),
		      "qdisc tbf 8001: dev swp3 parent 1:4"));
	CHECK(!strcmp(qline("prio", 0x20000, 0x10000, "eth0"),
		      "qdisc prio 2: dev eth0 parent 1:"));

	/* the fields, and what is not a qdisc */
	CHECK(!nlshow_qdisc(qdisc_msg(&m, "netem", 7, 0x80020000, TC_H_ROOT),
			    &q));
	CHECK(!strcmp(q.kind, "netem") && q.ifindex == 7 &&
	      q.handle == 0x80020000 && q.parent == TC_H_ROOT);
	CHECK(nlshow_qdisc(qdisc_msg(&m, NULL, 2, 0, TC_H_ROOT), &q) == -1);
	qdisc_msg(&m, "mq", 2, 0, TC_H_ROOT);
	((struct nlmsghdr *)m.buf)->nlmsg_type = RTM_NEWTCLASS;
	CHECK(nlshow_qdisc((struct nlmsghdr *)m.buf, &q) == -1);
	/* a kind longer than the field is cut, not overrun */
	CHECK(!nlshow_qdisc(qdisc_msg(&m, long_kind, 2, 0, TC_H_ROOT), &q));
	CHECK(strlen(q.kind) == sizeof(q.kind) - 1);
}

static const struct nlmsghdr *table_msg(struct rtnl_msg *m, uint8_t family,
					const char *name)
{
	struct nfgenmsg g = { .nfgen_family = family,
			      .version = NFNETLINK_V0 };

	rtnl_msg_init(m, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE, 0,
		      &g, sizeof(g));
	if (name)
		rtnl_msg_put_str(m, NFTA_TABLE_NAME, name);
	rtnl_msg_put(m, NFTA_TABLE_FLAGS, "\0\0\0\0", 4);
	return (const struct nlmsghdr *)m->buf;
}

static void test_tables(void)
{
	/* nft list tables: "table inet dcbapp", "table ip filter", ... */
	static const struct {
		uint8_t family;
		const char *name, *line;
	} cases[] = {
		{ NFPROTO_INET, "dcbapp", "table inet dcbapp" },
		{ NFPROTO_IPV4, "filter", "table ip filter" },
		{ NFPROTO_IPV6, "t", "table ip6 t" },
		{ NFPROTO_NETDEV, "ingress", "table netdev ingress" },
		{ NFPROTO_BRIDGE, "b", "table bridge b" },
		{ NFPROTO_ARP, "a", "table arp a" },
		{ 99, "x", "table 99 x" },
	};
	struct rtnl_msg m;
	char line[300];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(!nlshow_nft_table(table_msg(&m, cases[i].family,
						  cases[i].name),
					line, sizeof(line)));
		CHECK(!strcmp(line, cases[i].line));
	}
	/* no name, or another message: no line */
	CHECK(nlshow_nft_table(table_msg(&m, NFPROTO_INET, NULL), line,
			       sizeof(line)) == -1);
	table_msg(&m, NFPROTO_INET, "t");
	((struct nlmsghdr *)m.buf)->nlmsg_type =
		(NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN;
	CHECK(nlshow_nft_table((struct nlmsghdr *)m.buf, line,
			       sizeof(line)) == -1);
}

int main(void)
{
	test_qdiscs();
	test_tables();
	printf("test_nlshow: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed != 0;
}
