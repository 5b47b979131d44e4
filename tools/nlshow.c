// SPDX-License-Identifier: GPL-2.0
/*
 * nldump's lines (nlshow.h).  The formats are iproute2 6.1's tc (the
 * qdisc handle and parent) and nftables 1.0.6's `list tables` (the
 * family names), read, not copied: the restore parses them as it parsed
 * those tools' output.
 */
#include "nlshow.h"
#include "rtnl.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>

/* A nul-terminated string attribute into out (cut to its size). */
static int attr_str(const struct nlattr *a, char *out, size_t size)
{
	size_t n;

	if (!a || !RTNL_LEN(a) || !size)
		return -1;
	n = strnlen(RTNL_DATA(a), RTNL_LEN(a));
	if (n >= size)
		n = size - 1;
	memcpy(out, RTNL_DATA(a), n);
	out[n] = '\0';
	return 0;
}

int nlshow_qdisc(const struct nlmsghdr *h, struct nlshow_qdisc *q)
{
	const size_t hdr = NLMSG_ALIGN(sizeof(struct tcmsg));
	const struct nlattr *tb[TCA_MAX + 1];
	const struct tcmsg *t = NLMSG_DATA(h);

	if (h->nlmsg_type != RTM_NEWQDISC || h->nlmsg_len < NLMSG_LENGTH(hdr))
		return -1;
	rtnl_attrs((const char *)t + hdr, h->nlmsg_len - NLMSG_LENGTH(hdr),
		   tb, TCA_MAX);
	if (attr_str(tb[TCA_KIND], q->kind, sizeof(q->kind)))
		return -1;
	q->ifindex = t->tcm_ifindex;
	q->handle = t->tcm_handle;
	q->parent = t->tcm_parent;
	return 0;
}

void nlshow_qdisc_line(const struct nlshow_qdisc *q, const char *dev,
		       char *buf, size_t len)
{
	int n = snprintf(buf, len, "qdisc %s %x: dev %s ", q->kind,
			 TC_H_MAJ(q->handle) >> 16, dev);
	uint32_t maj = TC_H_MAJ(q->parent) >> 16, min = TC_H_MIN(q->parent);

	if (n < 0 || (size_t)n >= len)
		return;
	buf += n;
	len -= (size_t)n;
	if (q->parent == TC_H_ROOT)
		snprintf(buf, len, "root");
	else if (!maj)
		snprintf(buf, len, "parent :%x", min);
	else if (!min)
		snprintf(buf, len, "parent %x:", maj);
	else
		snprintf(buf, len, "parent %x:%x", maj, min);
}

static const char *family(uint8_t f, char *num, size_t size)
{
	switch (f) {
	case NFPROTO_IPV4:	return "ip";
	case NFPROTO_IPV6:	return "ip6";
	case NFPROTO_INET:	return "inet";
	case NFPROTO_ARP:	return "arp";
	case NFPROTO_BRIDGE:	return "bridge";
	case NFPROTO_NETDEV:	return "netdev";
	}
	snprintf(num, size, "%u", f);
	return num;
}

int nlshow_nft_table(const struct nlmsghdr *h, char *buf, size_t len)
{
	const size_t hdr = NLMSG_ALIGN(sizeof(struct nfgenmsg));
	const struct nlattr *tb[NFTA_TABLE_MAX + 1];
	const struct nfgenmsg *g = NLMSG_DATA(h);
	char name[256], num[4];

	if (h->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE) ||
	    h->nlmsg_len < NLMSG_LENGTH(hdr))
		return -1;
	rtnl_attrs((const char *)g + hdr, h->nlmsg_len - NLMSG_LENGTH(hdr),
		   tb, NFTA_TABLE_MAX);
	if (attr_str(tb[NFTA_TABLE_NAME], name, sizeof(name)))
		return -1;
	snprintf(buf, len, "table %s %s",
		 family(g->nfgen_family, num, sizeof(num)), name);
	return 0;
}
