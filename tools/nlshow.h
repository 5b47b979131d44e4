/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The lines nldump prints for the kernel's netlink answers: a qdisc
 * (RTM_NEWQDISC) as `tc qdisc show` begins its line, an nftables table
 * (NFT_MSG_NEWTABLE) as `nft list tables` prints it.  Pure: the host's
 * unit tests (test_nlshow.c) give them built bytes.
 */
#ifndef DCBLAB_NLSHOW_H
#define DCBLAB_NLSHOW_H

#include <linux/netlink.h>
#include <stddef.h>
#include <stdint.h>

struct nlshow_qdisc {
	char kind[32];
	int ifindex;
	uint32_t handle, parent;
};

/* 0, or -1 if h is not an RTM_NEWQDISC with a TCA_KIND. */
int nlshow_qdisc(const struct nlmsghdr *h, struct nlshow_qdisc *q);
/*
 * "qdisc KIND MAJ: dev DEV root" or "... parent MAJ:MIN" (tc's handle
 * notation: an empty major or minor is left out): tc's first words.
 */
void nlshow_qdisc_line(const struct nlshow_qdisc *q, const char *dev,
		       char *buf, size_t len);
/*
 * "table FAMILY NAME" of an NFT_MSG_NEWTABLE into buf: 0, or -1 if h is
 * not one or has no name.  An unknown family is its number.
 */
int nlshow_nft_table(const struct nlmsghdr *h, char *buf, size_t len);

#endif
