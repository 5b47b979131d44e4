/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small rtnetlink client for the guest tools: build a request (header,
 * attributes, nests) in a buffer, send it with NLM_F_ACK and read the
 * kernel's errno back; links added (dummy, VLAN) and deleted by name.
 *
 * Building is pure (rtnl_msg_*, rtnl_build_*), so the host's unit tests
 * check the bytes; only rtnl_open() and rtnl_talk() touch a socket.  One
 * struct rtnl per thread: requests and their acks are matched by
 * sequence number on that socket.
 */
#ifndef DCBLAB_RTNL_H
#define DCBLAB_RTNL_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rtnl_msg {
	/* Aligned for the headers and attributes built in it. */
	union {
		char buf[1024];
		struct nlmsghdr align;
	};
	size_t len;
	int overflow;		/* an attribute did not fit: not sent */
};

/* A request: nlmsghdr of type, flags | NLM_F_REQUEST, then hdr (hdrlen). */
void rtnl_msg_init(struct rtnl_msg *m, uint16_t type, uint16_t flags,
		   const void *hdr, size_t hdrlen);
/* An attribute; NULL data with len 0 opens a nest. */
struct nlattr *rtnl_msg_put(struct rtnl_msg *m, uint16_t type,
			    const void *data, size_t len);
struct nlattr *rtnl_msg_put_str(struct rtnl_msg *m, uint16_t type,
				const char *s);
/* Closes a nest rtnl_msg_put() opened: its length covers what followed. */
void rtnl_msg_end_nest(struct rtnl_msg *m, struct nlattr *nest);

/*
 * RTM_NEWLINK (NLM_F_CREATE | NLM_F_EXCL) of a link kind ("dummy",
 * "vlan") named name; for a VLAN, lower_ifindex and vid.
 */
void rtnl_build_newlink(struct rtnl_msg *m, const char *name,
			const char *kind, int lower_ifindex, uint16_t vid);
/* RTM_DELLINK of the link named name. */
void rtnl_build_dellink(struct rtnl_msg *m, const char *name);

struct rtnl {
	int fd;
	uint32_t seq;
};

/* 0, or an errno (socket, bind). */
int rtnl_open(struct rtnl *r);
/* The same on another netlink family (NETLINK_NETFILTER, say). */
int rtnl_open_proto(struct rtnl *r, int protocol);
void rtnl_close(struct rtnl *r);
/*
 * Send m with NLM_F_ACK and wait for its ack: 0, the kernel's errno
 * (positive), or the errno of send/recv; EMSGSIZE if m overflowed.
 */
int rtnl_talk(struct rtnl *r, struct rtnl_msg *m);

/*
 * Is h a dump request (a GET with NLM_F_DUMP), whose answer ends with
 * NLMSG_DONE, not with its ack?
 */
bool rtnl_is_dump(const struct nlmsghdr *h);

/*
 * Send m (a get or a dump: NLM_F_DUMP in its flags) and call cb with each
 * reply message until the last: 0, the kernel's errno (positive), the
 * errno of send/recv, or cb's non-zero return, which stops the reading
 * (the rest of the replies are then read and dropped by the next call's
 * sequence check).
 */
int rtnl_request(struct rtnl *r, struct rtnl_msg *m,
		 int (*cb)(const struct nlmsghdr *h, void *ctx), void *ctx);

/*
 * The attributes in [start, start + len) by type into tb[0..max]: the
 * last of each type wins, types above max and broken lengths end the walk.
 * tb is zeroed first.
 */
void rtnl_attrs(const void *start, size_t len, const struct nlattr **tb,
		unsigned int max);
/* The payload of an attribute and its length. */
#define RTNL_DATA(a)	((const void *)((const char *)(a) + NLA_HDRLEN))
#define RTNL_LEN(a)	((size_t)((a)->nla_len - NLA_HDRLEN))

/* The requests above, talked: 0 or an errno. */
int rtnl_add_dummy(struct rtnl *r, const char *name);
int rtnl_add_vlan(struct rtnl *r, const char *name, const char *lower,
		  uint16_t vid);
int rtnl_del_link(struct rtnl *r, const char *name);

#endif
