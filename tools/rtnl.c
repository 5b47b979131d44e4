// SPDX-License-Identifier: GPL-2.0
/* Requests over rtnetlink and their acks; see rtnl.h. */
#include "rtnl.h"

#include <errno.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void rtnl_msg_init(struct rtnl_msg *m, uint16_t type, uint16_t flags,
		   const void *hdr, size_t hdrlen)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->buf;

	memset(m, 0, sizeof(*m));
	m->len = NLMSG_LENGTH(hdrlen);
	h->nlmsg_type = type;
	h->nlmsg_flags = flags | NLM_F_REQUEST;
	if (hdr)
		memcpy(NLMSG_DATA(h), hdr, hdrlen);
	m->len = NLMSG_ALIGN(m->len);
	h->nlmsg_len = (uint32_t)m->len;
}

struct nlattr *rtnl_msg_put(struct rtnl_msg *m, uint16_t type,
			    const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)(m->buf + m->len);

	if (m->len + NLA_ALIGN(NLA_HDRLEN + len) > sizeof(m->buf)) {
		m->overflow = 1;
		/* A place to write to that is not sent. */
		return (struct nlattr *)m->buf;
	}
	memset(a, 0, NLA_ALIGN(NLA_HDRLEN + len));
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	if (data)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	m->len += NLA_ALIGN(a->nla_len);
	((struct nlmsghdr *)m->buf)->nlmsg_len = (uint32_t)m->len;
	return a;
}

struct nlattr *rtnl_msg_put_str(struct rtnl_msg *m, uint16_t type,
				const char *s)
{
	return rtnl_msg_put(m, type, s, strlen(s) + 1);
}

void rtnl_msg_end_nest(struct rtnl_msg *m, struct nlattr *nest)
{
	if (!m->overflow)
		nest->nla_len = (uint16_t)(m->buf + m->len - (char *)nest);
}

void rtnl_build_newlink(struct rtnl_msg *m, const char *name,
			const char *kind, int lower_ifindex, uint16_t vid)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nlattr *info, *data;

	rtnl_msg_init(m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi,
		      sizeof(ifi));
	rtnl_msg_put_str(m, IFLA_IFNAME, name);
	if (lower_ifindex) {
		uint32_t link = (uint32_t)lower_ifindex;

		rtnl_msg_put(m, IFLA_LINK, &link, sizeof(link));
	}
	info = rtnl_msg_put(m, IFLA_LINKINFO, NULL, 0);
	rtnl_msg_put_str(m, IFLA_INFO_KIND, kind);
	if (!strcmp(kind, "vlan")) {
		data = rtnl_msg_put(m, IFLA_INFO_DATA, NULL, 0);
		rtnl_msg_put(m, IFLA_VLAN_ID, &vid, sizeof(vid));
		rtnl_msg_end_nest(m, data);
	}
	rtnl_msg_end_nest(m, info);
}

void rtnl_build_dellink(struct rtnl_msg *m, const char *name)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };

	rtnl_msg_init(m, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	rtnl_msg_put_str(m, IFLA_IFNAME, name);
}

int rtnl_open(struct rtnl *r)
{
	return rtnl_open_proto(r, NETLINK_ROUTE);
}

int rtnl_open_proto(struct rtnl *r, int protocol)
{
	struct sockaddr_nl local = { .nl_family = AF_NETLINK };

	r->seq = 0;
	r->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
	if (r->fd < 0)
		return errno;
	if (bind(r->fd, (struct sockaddr *)&local, sizeof(local)) < 0) {
		int err = errno;

		close(r->fd);
		r->fd = -1;
		return err;
	}
	return 0;
}

void rtnl_close(struct rtnl *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

bool rtnl_is_dump(const struct nlmsghdr *h)
{
	/* rtnetlink's message types come in fours: NEW, DEL, GET, SET.  On a
	 * NEW, 0x200 and 0x100 are NLM_F_EXCL and NLM_F_REPLACE, the bits
	 * NLM_F_DUMP is made of on a GET.
	 */
	return (h->nlmsg_type & 3) == 2 &&
	       (h->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
}

int rtnl_request(struct rtnl *r, struct rtnl_msg *m,
		 int (*cb)(const struct nlmsghdr *h, void *ctx), void *ctx)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->buf;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	bool dump = rtnl_is_dump(h);
	/* On the stack: one struct rtnl per thread (cgfuzz, dcbfuzz). The
	 * kernel sizes a dump's messages to the reader's buffer.
	 */
	union {
		char buf[32768];
		struct nlmsghdr align;
	} reply;

	if (m->overflow)
		return EMSGSIZE;
	h->nlmsg_flags |= NLM_F_ACK;
	h->nlmsg_seq = ++r->seq;
	if (sendto(r->fd, m->buf, m->len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0)
		return errno;
	for (;;) {
		ssize_t n = recv(r->fd, reply.buf, sizeof(reply.buf), 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		for (struct nlmsghdr *p = &reply.align; NLMSG_OK(p, n);
		     p = NLMSG_NEXT(p, n)) {
			struct nlmsgerr *e = NLMSG_DATA(p);
			int err;

			if (p->nlmsg_seq != r->seq)
				continue;
			if (p->nlmsg_type == NLMSG_DONE)
				return 0;
			if (p->nlmsg_type == NLMSG_ERROR) {
				if (p->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return EBADMSG;
				/* a get's ack follows its reply */
				if (e->error || !dump)
					return -e->error;
				continue;
			}
			err = cb(p, ctx);
			if (err)
				return err;
		}
	}
}

/* A request's answer is its ack alone: nothing to read but that. */
static int no_reply(const struct nlmsghdr *h, void *ctx)
{
	(void)h;
	(void)ctx;
	return 0;
}

int rtnl_talk(struct rtnl *r, struct rtnl_msg *m)
{
	return rtnl_request(r, m, no_reply, NULL);
}

void rtnl_attrs(const void *start, size_t len, const struct nlattr **tb,
		unsigned int max)
{
	const char *p = start, *end = p + len;

	memset(tb, 0, sizeof(*tb) * (max + 1));
	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const void *)p;
		unsigned int type = a->nla_type & NLA_TYPE_MASK;

		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			return;
		if (type <= max)
			tb[type] = a;
		p += NLA_ALIGN(a->nla_len);
	}
}

int rtnl_add_dummy(struct rtnl *r, const char *name)
{
	struct rtnl_msg m;

	rtnl_build_newlink(&m, name, "dummy", 0, 0);
	return rtnl_talk(r, &m);
}

int rtnl_add_vlan(struct rtnl *r, const char *name, const char *lower,
		  uint16_t vid)
{
	unsigned int lower_ifindex = if_nametoindex(lower);
	struct rtnl_msg m;

	if (!lower_ifindex)
		return errno;
	rtnl_build_newlink(&m, name, "vlan", (int)lower_ifindex, vid);
	return rtnl_talk(r, &m);
}

int rtnl_del_link(struct rtnl *r, const char *name)
{
	struct rtnl_msg m;

	rtnl_build_dellink(&m, name);
	return rtnl_talk(r, &m);
}
