// SPDX-License-Identifier: GPL-2.0
/*
 * dcbnl-raw - send one IEEE DCB set (or delete) to a device, unchecked,
 * and report the driver's answer by errno name.
 *
 * iproute2's dcb refuses many invalid configurations itself (a priority 8,
 * a DSCP of 64, an unknown APP selector) before the kernel sees them; a
 * test of the driver's own checks needs them to reach the driver.  The
 * value is the struct's bytes in hex, exactly as they go on the wire:
 * struct ieee_ets (59 bytes), struct ieee_pfc (136) or struct dcb_app (4).
 *
 *   dcbnl-raw [-j] [-d] DEV ets|pfc|app HEX
 *   dcbnl-raw [-j] DEV cee-app IDTYPE:ID:PRIO
 *   dcbnl-raw DEV reset
 *   dcbnl-raw [-j] DEV get
 *
 * reset puts DEV's DCB back to the driver's defaults (ETS: every priority
 * in TC 0, every class strict; PFC off; no APP entries), touching only
 * what differs, and prints one line per change: dcblab-restore runs it
 * between tests.  get prints the kernel's whole reply to DCB_CMD_IEEE_GET
 * (the datagram, netlink header first) in hex: the captured messages
 * dcbapp-netprio's parser is tested on come from it.  cee-app sends CEE's
 * DCB_CMD_SAPP (one APP entry as three attributes, no driver check in
 * dcbnl unless the driver has a .setapp).
 *
 * dcbnl acknowledges an IEEE set with 0 even when the driver refused it:
 * the driver's error travels as a u8 attribute (DCB_ATTR_IEEE) of the
 * reply, which this tool reads back as a signed errno.  Errors of dcbnl
 * itself (no such device: ENODEV, no dcbnl ops: EOPNOTSUPP) come as a
 * netlink error message.
 *
 * Exit 0 when the kernel answered 0, 1 when it answered an error (stderr:
 * "dcbnl-raw: DEV KIND: ENAME (strerror)"), 2 on usage errors.
 */
#include "util.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void usage(void)
{
	printf("usage: dcbnl-raw [-j] [-d] DEV ets|pfc|app HEX\n"
	       "       dcbnl-raw [-j] DEV cee-app IDTYPE:ID:PRIO\n"
	       "       dcbnl-raw DEV reset\n"
	       "       dcbnl-raw [-j] DEV get\n"
	       "  send RTM_SETDCB DCB_CMD_IEEE_SET (-d: DCB_CMD_IEEE_DEL) for DEV\n"
	       "  with one attribute whose payload is HEX, unchecked:\n"
	       "    ets  struct ieee_ets, %zu bytes\n"
	       "    pfc  struct ieee_pfc, %zu bytes\n"
	       "    app  struct dcb_app, %zu bytes (in DCB_ATTR_IEEE_APP_TABLE)\n"
	       "  and report the kernel's answer by errno name;\n"
	       "  cee-app: CEE DCB_CMD_SAPP of one entry (IDTYPE 0 ethertype,\n"
	       "  1 port; numbers in C notation), its answer likewise;\n"
	       "  reset: ETS, PFC and APP back to the driver's defaults, one\n"
	       "  line printed per change\n"
	       "  get: the kernel's reply to DCB_CMD_IEEE_GET, the whole\n"
	       "  datagram in hex (-j: {\"bytes\":N,\"hex\":\"...\"})\n"
	       "  -d, --del    DCB_CMD_IEEE_DEL (meaningful for app)\n"
	       "  -j, --json   print {\"errno\":N,\"name\":\"...\"}\n"
	       "  -h, --help   this text\n"
	       "exit: 0 the kernel answered 0, 1 it answered an error, 2 usage\n",
	       sizeof(struct ieee_ets), sizeof(struct ieee_pfc),
	       sizeof(struct dcb_app));
}

struct opts {
	bool del;
};

static int set_opt(void *ctx, int c, const char *arg)
{
	(void)arg;
	if (c == 'd')
		((struct opts *)ctx)->del = true;
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* HEX of exactly want bytes into out; 0 or EXIT_USAGE */
static int parse_hex(const char *text, uint8_t *out, size_t want)
{
	size_t len = strlen(text);

	if (len != 2 * want)
		return usage_error("HEX has %zu digits: %zu bytes need %zu",
				   len, want, 2 * want);
	for (size_t i = 0; i < want; i++) {
		int hi = hexval(text[2 * i]), lo = hexval(text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return usage_error("HEX: '%c%c' at byte %zu is not hex",
					   text[2 * i], text[2 * i + 1], i);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

struct msg {
	char buf[512];
	size_t len;
};

static struct nlattr *put_attr(struct msg *m, uint16_t type, const void *data,
			       size_t len)
{
	struct nlattr *a = (struct nlattr *)(m->buf + m->len);

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	if (data)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	m->len += NLA_ALIGN(a->nla_len);
	return a;
}

static void end_nest(struct msg *m, struct nlattr *a)
{
	a->nla_len = (uint16_t)(m->buf + m->len - (char *)a);
}

/* The attributes of a nest (or of a message's payload), one by one */
#define for_each_attr(a, start, len)					\
	for (struct nlattr *a = (start); (len) >= NLA_HDRLEN &&		\
	     a->nla_len >= NLA_HDRLEN && a->nla_len <= (len);		\
	     (len) -= NLA_ALIGN(a->nla_len),				\
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))

/*
 * Read the kernel's reply to a request into buf (n bytes): 0 with n set,
 * or -1 with *why when nothing could be read.
 */
static int recv_reply(int fd, char *buf, size_t size, ssize_t *n,
		      const char **why)
{
	*n = recv(fd, buf, size, 0);
	if (*n < 0) {
		*why = errno == EAGAIN ? "no answer within 5 s" : strerror(errno);
		return -1;
	}
	return 0;
}

/*
 * The first message of type in a reply of n bytes: its attributes (after
 * struct dcbmsg) in *attrs, *len bytes, and 0; a netlink error message
 * before it gives its errno (positive, 0 for an ack); -1 with *why when
 * neither is there.
 */
static int dcb_reply(char *buf, ssize_t n, uint16_t type,
		     struct nlattr **attrs, int *len, const char **why)
{
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n);
	     h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error < 0 ? -e->error : e->error;
		}
		if (h->nlmsg_type != type)
			continue;
		*len = (int)NLMSG_PAYLOAD(h, sizeof(struct dcbmsg));
		*attrs = (struct nlattr *)((char *)NLMSG_DATA(h) +
					   NLMSG_ALIGN(sizeof(struct dcbmsg)));
		return 0;
	}
	*why = type == RTM_SETDCB ? "no RTM_SETDCB reply or netlink error"
				  : "no RTM_GETDCB reply";
	return -1;
}

/*
 * The kernel's answer to a set/del whose reply carries the driver's error
 * in the u8 attribute attr (DCB_ATTR_IEEE, DCB_ATTR_APP): the errno
 * (positive), 0, or -1 with *why set when no answer could be read.
 */
static int answer(int fd, uint16_t attr, const char **why)
{
	char buf[8192];
	struct nlattr *attrs = NULL;
	ssize_t n;
	int len = 0, err;

	if (recv_reply(fd, buf, sizeof(buf), &n, why))
		return -1;
	err = dcb_reply(buf, n, RTM_SETDCB, &attrs, &len, why);
	if (err)
		return err;
	for_each_attr(a, attrs, len) {
		if (a->nla_type == attr && a->nla_len >= NLA_HDRLEN + 1) {
			int8_t e = *(int8_t *)((char *)a + NLA_HDRLEN);

			return e < 0 ? -e : e;
		}
	}
	*why = "reply without the driver's answer attribute";
	return -1;
}

/*
 * One IEEE set/del of attribute type with value (type 0: a get, answered
 * by the caller); the errno, or -1.  DCB_ATTR_IEEE_APP (an entry of the
 * APP table nest) has the same number as DCB_ATTR_IEEE_ETS: APP_ENTRY
 * stands for it here.
 */
#define APP_ENTRY 0x100

/* A dcbnl request of type and cmd for dev, its attributes to follow. */
static void msg_start(struct msg *m, uint16_t type, uint8_t cmd,
		      const char *dev)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->buf;
	struct dcbmsg *d = NLMSG_DATA(h);

	memset(m, 0, sizeof(*m));
	m->len = NLMSG_LENGTH(sizeof(struct dcbmsg));
	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST;
	h->nlmsg_seq = 1;
	d->dcb_family = AF_UNSPEC;
	d->cmd = cmd;
	put_attr(m, DCB_ATTR_IFNAME, dev, strlen(dev) + 1);
}

/* Sends m to the kernel: 0, or -1 with *why */
static int msg_send(int fd, struct msg *m, const char **why)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	((struct nlmsghdr *)m->buf)->nlmsg_len = (uint32_t)m->len;
	if (sendto(fd, m->buf, m->len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0) {
		*why = strerror(errno);
		return -1;
	}
	return 0;
}

static int send_ieee(int fd, const char *dev, uint8_t cmd, unsigned int type,
		     const void *value, size_t len, const char **why)
{
	struct msg m;

	msg_start(&m, type ? RTM_SETDCB : RTM_GETDCB, cmd, dev);
	if (type) {
		struct nlattr *ieee = put_attr(&m, DCB_ATTR_IEEE, NULL, 0);

		if (type == APP_ENTRY) {
			struct nlattr *table = put_attr(&m,
					DCB_ATTR_IEEE_APP_TABLE, NULL, 0);

			put_attr(&m, DCB_ATTR_IEEE_APP, value, len);
			end_nest(&m, table);
		} else {
			put_attr(&m, type, value, len);
		}
		end_nest(&m, ieee);
	}
	if (msg_send(fd, &m, why))
		return -1;
	return type ? answer(fd, DCB_ATTR_IEEE, why) : 0;
}

/* CEE's DCB_CMD_SAPP of one APP entry: the errno, 0, or -1 with *why */
static int send_cee_app(int fd, const char *dev, uint8_t idtype, uint16_t id,
			uint8_t prio, const char **why)
{
	struct msg m;
	struct nlattr *app;

	msg_start(&m, RTM_SETDCB, DCB_CMD_SAPP, dev);
	app = put_attr(&m, DCB_ATTR_APP, NULL, 0);
	put_attr(&m, DCB_APP_ATTR_IDTYPE, &idtype, sizeof(idtype));
	put_attr(&m, DCB_APP_ATTR_ID, &id, sizeof(id));
	put_attr(&m, DCB_APP_ATTR_PRIORITY, &prio, sizeof(prio));
	end_nest(&m, app);
	if (msg_send(fd, &m, why))
		return -1;
	return answer(fd, DCB_ATTR_APP, why);
}

/* IDTYPE:ID:PRIO, each a number in C notation within its field */
static int parse_cee_app(const char *text, uint8_t *idtype, uint16_t *id,
			 uint8_t *prio)
{
	unsigned long v[3];
	const char *p = text;
	char *end;

	for (int i = 0; i < 3; i++) {
		errno = 0;
		v[i] = strtoul(p, &end, 0);
		if (errno || end == p || *end != (i < 2 ? ':' : '\0'))
			return usage_error("cee-app '%s': expected IDTYPE:ID:PRIO",
					   text);
		p = end + 1;
	}
	if (v[0] > UINT8_MAX || v[1] > UINT16_MAX || v[2] > UINT8_MAX)
		return usage_error("cee-app '%s': IDTYPE and PRIO 0..255, ID "
				   "0..65535", text);
	*idtype = (uint8_t)v[0];
	*id = (uint16_t)v[1];
	*prio = (uint8_t)v[2];
	return 0;
}

#define MAX_APPS 64

struct ieee_state {
	struct ieee_ets ets;
	struct ieee_pfc pfc;
	struct dcb_app app[MAX_APPS];
	int napp;
};

/* DCB_CMD_IEEE_GET of dev into st: 0, an errno, or -1 with *why */
static int get_ieee(int fd, const char *dev, struct ieee_state *st,
		    const char **why)
{
	char buf[8192];
	struct nlattr *attrs = NULL;
	ssize_t n;
	int len = 0, err = send_ieee(fd, dev, DCB_CMD_IEEE_GET, 0, NULL, 0, why);

	if (err || recv_reply(fd, buf, sizeof(buf), &n, why))
		return err ? err : -1;
	memset(st, 0, sizeof(*st));
	err = dcb_reply(buf, n, RTM_GETDCB, &attrs, &len, why);
	if (err)
		return err;
	for_each_attr(a, attrs, len) {
		if (a->nla_type != DCB_ATTR_IEEE)
			continue;
		int ilen = a->nla_len - NLA_HDRLEN;

		for_each_attr(i, (struct nlattr *)((char *)a + NLA_HDRLEN),
			      ilen) {
			void *p = (char *)i + NLA_HDRLEN;
			size_t plen = i->nla_len - NLA_HDRLEN;
			int tlen = (int)plen;

			if (i->nla_type == DCB_ATTR_IEEE_ETS &&
			    plen >= sizeof(st->ets))
				memcpy(&st->ets, p, sizeof(st->ets));
			if (i->nla_type == DCB_ATTR_IEEE_PFC &&
			    plen >= sizeof(st->pfc))
				memcpy(&st->pfc, p, sizeof(st->pfc));
			if (i->nla_type != DCB_ATTR_IEEE_APP_TABLE)
				continue;
			for_each_attr(e, (struct nlattr *)p, tlen)
				if (e->nla_type == DCB_ATTR_IEEE_APP &&
				    e->nla_len >= NLA_HDRLEN +
				    sizeof(struct dcb_app) &&
				    st->napp < MAX_APPS)
					memcpy(&st->app[st->napp++],
					       (char *)e + NLA_HDRLEN,
					       sizeof(struct dcb_app));
		}
	}
	return 0;
}

/* The reply to DCB_CMD_IEEE_GET of dev, in hex; 0 or the exit status */
static int dump_get(int fd, const char *dev, bool json)
{
	static uint8_t buf[16384];
	static char hex[2 * sizeof(buf) + 1];
	const char *why = NULL;
	int err = send_ieee(fd, dev, DCB_CMD_IEEE_GET, 0, NULL, 0, &why);
	ssize_t n;

	if (err)
		return runtime_error("%s get: %s", dev, why);
	if (recv_reply(fd, (char *)buf, sizeof(buf), &n, &why))
		return runtime_error("%s get: %s", dev, why);
	for (ssize_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", buf[i]);
	hex[2 * n] = '\0';
	new_json_obj(stdout, json);
	print_uint(PRINT_JSON, "bytes", NULL, (unsigned long long)n);
	print_string(PRINT_ANY, "hex", "%s\n", hex);
	delete_json_obj();
	if (n >= (ssize_t)NLMSG_HDRLEN &&
	    ((struct nlmsghdr *)buf)->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA((struct nlmsghdr *)buf);

		if (e->error)
			return runtime_error("%s get: %s (%s)", dev,
					     errname(-e->error),
					     strerror(-e->error));
	}
	return 0;
}

/* dev's DCB back to the driver's defaults; 0 or the exit status */
static int reset(int fd, const char *dev)
{
	struct ieee_state st;
	struct ieee_ets ets = { .ets_cap = IEEE_8021QAZ_MAX_TCS };
	struct ieee_pfc pfc = { .pfc_cap = IEEE_8021QAZ_MAX_TCS };
	const char *why = NULL;
	int err = get_ieee(fd, dev, &st, &why);

	if (err > 0)
		return runtime_error("%s: DCB_CMD_IEEE_GET: %s (%s)", dev,
				     errname(err), strerror(err));
	if (err < 0)
		return runtime_error("%s: DCB_CMD_IEEE_GET: %s", dev, why);
	st.ets.ets_cap = IEEE_8021QAZ_MAX_TCS;
	if (memcmp(&st.ets, &ets, sizeof(ets))) {
		err = send_ieee(fd, dev, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS,
				&ets, sizeof(ets), &why);
		if (err)
			goto fail;
		printf("%s: ets -> all priorities in TC 0, strict\n", dev);
	}
	if (st.pfc.pfc_en || st.pfc.mbc || st.pfc.delay) {
		err = send_ieee(fd, dev, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_PFC,
				&pfc, sizeof(pfc), &why);
		if (err)
			goto fail;
		printf("%s: pfc 0x%02x -> off\n", dev, st.pfc.pfc_en);
	}
	for (int i = 0; i < st.napp; i++) {
		struct dcb_app *a = &st.app[i];

		err = send_ieee(fd, dev, DCB_CMD_IEEE_DEL, APP_ENTRY, a,
				sizeof(*a), &why);
		if (err)
			goto fail;
		printf("%s: app selector %u protocol %u priority %u deleted\n",
		       dev, a->selector, a->protocol, a->priority);
	}
	return 0;
fail:
	if (err > 0)
		return runtime_error("%s reset: %s (%s)", dev, errname(err),
				     strerror(err));
	return runtime_error("%s reset: %s", dev, why);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "del", no_argument, NULL, 'd' },
		COMMON_OPTIONS
	};
	struct opts o = { 0 };
	struct cli cli = { .shortopts = ":djh", .longopts = lo,
			   .any_operands = true, .usage = usage,
			   .set = set_opt, .ctx = &o };
	uint8_t value[sizeof(struct ieee_pfc)];
	size_t want = 0;
	unsigned int type = 0;
	int err;

	progname = "dcbnl-raw";
	err = parse_options(argc, argv, &cli);
	if (err)
		return err;
	int left = argc - optind;
	const char *dev = left > 0 ? argv[optind] : "";
	const char *kind = left > 1 ? argv[optind + 1] : "";

	bool two = !strcmp(kind, "reset") || !strcmp(kind, "get");

	if (two ? left != 2 : left != 3)
		return usage_error("expected DEV ets|pfc|app HEX, DEV cee-app "
				   "IDTYPE:ID:PRIO, or DEV reset|get");
	if (strlen(dev) >= IFNAMSIZ)
		return usage_error("DEV '%s' is longer than %d characters",
				   dev, IFNAMSIZ - 1);
	if (!strcmp(kind, "ets")) {
		want = sizeof(struct ieee_ets);
		type = DCB_ATTR_IEEE_ETS;
	} else if (!strcmp(kind, "pfc")) {
		want = sizeof(struct ieee_pfc);
		type = DCB_ATTR_IEEE_PFC;
	} else if (!strcmp(kind, "app")) {
		want = sizeof(struct dcb_app);
		type = APP_ENTRY;
	} else if (!strcmp(kind, "cee-app")) {
		type = DCB_ATTR_APP;
	} else if (!two) {
		return usage_error("KIND '%s': ets, pfc, app, cee-app, reset or "
				   "get", kind);
	}
	uint8_t idtype = 0, prio = 0;
	uint16_t id = 0;

	if (type == DCB_ATTR_APP) {
		err = parse_cee_app(argv[optind + 2], &idtype, &id, &prio);
		if (err)
			return err;
	} else if (type) {
		err = parse_hex(argv[optind + 2], value, want);
		if (err)
			return err;
	}

	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct timeval tv = { .tv_sec = 5 };
	const char *why = NULL;

	if (fd < 0)
		return runtime_error("netlink socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!type) {
		err = strcmp(kind, "get") ? reset(fd, dev)
					  : dump_get(fd, dev, cli.json);
		close(fd);
		return err;
	}
	if (type == DCB_ATTR_APP)
		err = send_cee_app(fd, dev, idtype, id, prio, &why);
	else
		err = send_ieee(fd, dev, o.del ? DCB_CMD_IEEE_DEL
				: DCB_CMD_IEEE_SET, type, value, want, &why);
	close(fd);
	if (err < 0)
		return runtime_error("%s %s: %s", dev, kind, why);

	new_json_obj(stdout, cli.json);
	print_int(PRINT_JSON, "errno", NULL, err);
	print_string(PRINT_JSON, "name", NULL, err ? errname(err) : "");
	delete_json_obj();
	if (err)
		return runtime_error("%s %s: %s (%s)", dev, kind, errname(err),
				     strerror(err));
	return 0;
}
