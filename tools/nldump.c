// SPDX-License-Identifier: GPL-2.0
/*
 * nldump - the netlink-only state the per-test restore checks
 * (guest-image/restore), without running tc or nft: both are dynamically
 * linked, ~70 ms a run under TCG on the lab kernel and 0.3 s (tc) and
 * 0.4 s (nft) on the debug kernel, and the restore runs after every test
 * in each guest the test touched.  This is a dump request, no more: what
 * to remove, and removing it, stays with tc and nft.
 *
 *   nldump qdiscs       one line per qdisc of this netns, as `tc qdisc
 *                       show` begins it: "qdisc KIND MAJ: dev DEV root"
 *                       or "... parent MAJ:MIN"
 *   nldump nft-tables   one line per nftables table, as `nft list
 *                       tables` prints it: "table FAMILY NAME"
 *
 * Exit 0; 1 with one line on stderr if the dump failed; 2 on usage.
 */
#include "nlshow.h"
#include "rtnl.h"
#include "util.h"

#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int print_qdisc(const struct nlmsghdr *h, void *ctx)
{
	struct nlshow_qdisc q;
	char dev[IF_NAMESIZE], num[16], line[128];
	const char *name;

	(void)ctx;
	if (nlshow_qdisc(h, &q))
		return 0;
	name = if_indextoname((unsigned int)q.ifindex, dev);
	if (!name) {	/* gone since the dump: tc would say the same */
		snprintf(num, sizeof(num), "if%d", q.ifindex);
		name = num;
	}
	nlshow_qdisc_line(&q, name, line, sizeof(line));
	puts(line);
	return 0;
}

static int print_table(const struct nlmsghdr *h, void *ctx)
{
	char line[300];

	(void)ctx;
	if (!nlshow_nft_table(h, line, sizeof(line)))
		puts(line);
	return 0;
}

int main(int argc, char **argv)
{
	struct rtnl r;
	struct rtnl_msg m;
	int (*cb)(const struct nlmsghdr *h, void *ctx);
	int proto, err;

	progname = "nldump";
	if (argc == 2 && (!strcmp(argv[1], "-h") ||
			  !strcmp(argv[1], "--help"))) {
		printf("usage: nldump qdiscs|nft-tables\n"
		       "  qdiscs: this netns's qdiscs, a line each as tc "
		       "qdisc show begins it\n"
		       "  nft-tables: its nftables tables as nft list tables "
		       "prints them\n");
		return EXIT_SUCCESS;
	}
	if (argc == 2 && !strcmp(argv[1], "qdiscs")) {
		struct tcmsg t = { .tcm_family = AF_UNSPEC };

		proto = NETLINK_ROUTE;
		rtnl_msg_init(&m, RTM_GETQDISC, NLM_F_DUMP, &t, sizeof(t));
		cb = print_qdisc;
	} else if (argc == 2 && !strcmp(argv[1], "nft-tables")) {
		struct nfgenmsg g = { .nfgen_family = NFPROTO_UNSPEC,
				      .version = NFNETLINK_V0 };

		proto = NETLINK_NETFILTER;
		rtnl_msg_init(&m, (NFNL_SUBSYS_NFTABLES << 8) |
			      NFT_MSG_GETTABLE, NLM_F_DUMP, &g, sizeof(g));
		cb = print_table;
	} else {
		return usage_error("give qdiscs or nft-tables");
	}
	err = rtnl_open_proto(&r, proto);
	if (!err)
		err = rtnl_request(&r, &m, cb, NULL);
	rtnl_close(&r);
	if (fflush(stdout) && !err)
		err = errno;
	if (err)
		return runtime_error("%s: %s", argv[1], errname(err));
	return EXIT_SUCCESS;
}
