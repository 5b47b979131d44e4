// SPDX-License-Identifier: GPL-2.0
/* dcbapp-netprio's parser and engine; see dcbapp.h. */
#define _GNU_SOURCE	/* memfd_create */
#include "dcbapp.h"
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void report(const struct dcbapp_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void report(const struct dcbapp_report *r, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!r || !r->fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	r->fn(r->ctx, line);
}

int dcbapp_next_msg(const uint8_t *buf, size_t len, size_t *off,
		    struct dcbapp_msg *m, const struct dcbapp_report *r)
{
	size_t rem = *off < len ? len - *off : 0;
	struct nlmsghdr h;

	if (!rem)
		return 0;
	if (rem < sizeof(h)) {
		report(r, "netlink: %zu bytes at offset %zu, too short for "
		       "a struct nlmsghdr (%zu): rest of buffer dropped",
		       rem, *off, sizeof(h));
		*off = len;
		return -1;
	}
	/* memcpy: a bad nlmsg_len upstream leaves us unaligned. */
	memcpy(&h, buf + *off, sizeof(h));
	if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > rem) {
		report(r, "netlink: message type %u seq %u at offset %zu: "
		       "nlmsg_len %u, %zu bytes left: rest of buffer dropped",
		       h.nlmsg_type, h.nlmsg_seq, *off, h.nlmsg_len, rem);
		*off = len;
		return -1;
	}
	m->type = h.nlmsg_type;
	m->flags = h.nlmsg_flags;
	m->seq = h.nlmsg_seq;
	m->pid = h.nlmsg_pid;
	m->data = buf + *off;
	m->len = h.nlmsg_len;
	*off += NLMSG_ALIGN(h.nlmsg_len);
	if (*off > len)
		*off = len;
	return 1;
}

/* One attribute out of a run of them, copied out for alignment's sake. */
struct attr {
	uint16_t type;		/* without NLA_F_NESTED / _NET_BYTEORDER */
	const uint8_t *data;
	size_t len;		/* payload */
};

/* 1 an attribute, 0 the end, -1 malformed with why[] saying so. */
static int next_attr(const uint8_t *p, size_t len, size_t *off,
		     struct attr *a, char *why, size_t whysz)
{
	size_t rem = len - *off;
	struct nlattr h;

	if (!rem)
		return 0;
	if (rem < sizeof(h)) {
		snprintf(why, whysz, "%zu stray bytes after the last attribute",
			 rem);
		return -1;
	}
	memcpy(&h, p + *off, sizeof(h));
	a->type = h.nla_type & NLA_TYPE_MASK;
	if (h.nla_len < sizeof(h)) {
		snprintf(why, whysz, "attribute type %u: nla_len %u is below "
			 "the 4-byte header", a->type, h.nla_len);
		return -1;
	}
	if (h.nla_len > rem) {
		snprintf(why, whysz, "attribute type %u: nla_len %u, only %zu "
			 "bytes left", a->type, h.nla_len, rem);
		return -1;
	}
	a->data = p + *off + sizeof(h);
	a->len = h.nla_len - sizeof(h);
	*off += NLA_ALIGN(h.nla_len);
	if (*off > len)
		*off = len;
	return 1;
}

bool dcbapp_valid_ifname(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= IFNAMSIZ || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (; *name; name++)
		if (*name == '/' || *name == ':' || *name <= ' ' ||
		    *name == 0x7f)
			return false;
	return true;
}

/* A string attribute holding a device name; why[] when it does not. */
static bool attr_ifname(const struct attr *a, char out[IFNAMSIZ], char *why,
			size_t whysz)
{
	const uint8_t *nul = memchr(a->data, '\0', a->len);

	if (!nul) {
		snprintf(why, whysz, "%zu bytes without a NUL", a->len);
		return false;
	}
	if (nul - a->data >= IFNAMSIZ) {
		snprintf(why, whysz, "name of %zu bytes, IFNAMSIZ is %d",
			 (size_t)(nul - a->data), IFNAMSIZ);
		return false;
	}
	memcpy(out, a->data, nul - a->data + 1);
	if (!dcbapp_valid_ifname(out)) {
		snprintf(why, whysz, "'%s' is not a valid device name", out);
		return false;
	}
	return true;
}

const char *dcbapp_selector_name(unsigned int selector)
{
	static const char *const names[] = {
		[IEEE_8021QAZ_APP_SEL_ETHERTYPE] = "ethertype",
		[IEEE_8021QAZ_APP_SEL_STREAM] = "stream",
		[IEEE_8021QAZ_APP_SEL_DGRAM] = "dgram",
		[IEEE_8021QAZ_APP_SEL_ANY] = "any",
		[IEEE_8021QAZ_APP_SEL_DSCP] = "dscp",
	};

	if (selector < ARRAY_SIZE(names) && names[selector])
		return names[selector];
	return NULL;
}

static const char *cmd_name(uint8_t cmd)
{
	switch (cmd) {
	case DCB_CMD_IEEE_GET: return "IEEE_GET";
	case DCB_CMD_IEEE_SET: return "IEEE_SET";
	case DCB_CMD_IEEE_DEL: return "IEEE_DEL";
	case DCB_CMD_CEE_GET: return "CEE_GET";
	default: return "?";
	}
}

/* Why the entry cannot be used, or NULL. */
static const char *bad_entry(const struct dcbapp_entry *e)
{
	if (!dcbapp_selector_name(e->selector))
		return "unknown selector";
	if (e->priority >= 8)
		return "priority above 7";
	if (e->selector == IEEE_8021QAZ_APP_SEL_DSCP && e->protocol >= 64)
		return "DSCP above 63";
	return NULL;
}

static bool has_entry(const struct dcbapp_entry *e, int n,
		      const struct dcbapp_entry *x, bool with_prio)
{
	for (int i = 0; i < n; i++)
		if (e[i].selector == x->selector &&
		    e[i].protocol == x->protocol &&
		    (!with_prio || e[i].priority == x->priority))
			return true;
	return false;
}

/* The APP table nest: 0, or -1 when the message must be ignored. */
static int parse_app_table(const struct attr *tab, struct dcbapp_table *t,
			   const char *msg, const struct dcbapp_report *r)
{
	char why[160];
	struct attr a;
	size_t off = 0;
	int rc, idx = 0;

	while ((rc = next_attr(tab->data, tab->len, &off, &a, why,
			       sizeof(why))) > 0) {
		struct dcbapp_entry e;
		const char *bad;

		/* dcbnl_ieee_set() skips other types; so do we. */
		if (a.type != DCB_ATTR_IEEE_APP)
			continue;
		idx++;
		if (a.len != sizeof(struct dcb_app)) {
			report(r, "%s: DCB_ATTR_IEEE_APP #%d: payload of %zu "
			       "bytes, struct dcb_app is %zu: message ignored",
			       msg, idx, a.len, sizeof(struct dcb_app));
			return -1;
		}
		memcpy(&e, a.data, sizeof(e));
		bad = bad_entry(&e);
		if (bad) {
			report(r, "%s: DCB_ATTR_IEEE_APP #%d: sel %u proto %u "
			       "prio %u: %s: entry skipped, (sel %u, proto %u) "
			       "left as it was", msg, idx, e.selector,
			       e.protocol, e.priority, bad, e.selector,
			       e.protocol);
			if (has_entry(t->frozen, t->nfrozen, &e, false))
				continue;
			if (t->nfrozen == DCBAPP_MAX_ENTRIES) {
				report(r, "%s: DCB_ATTR_IEEE_APP_TABLE: more "
				       "than %d invalid entries: message "
				       "ignored", msg, DCBAPP_MAX_ENTRIES);
				return -1;
			}
			t->frozen[t->nfrozen++] = e;
			continue;
		}
		if (has_entry(t->e, t->n, &e, true))
			continue;
		if (t->n == DCBAPP_MAX_ENTRIES) {
			report(r, "%s: DCB_ATTR_IEEE_APP_TABLE: more than %d "
			       "entries: message ignored", msg,
			       DCBAPP_MAX_ENTRIES);
			return -1;
		}
		t->e[t->n++] = e;
	}
	if (rc < 0) {
		report(r, "%s: DCB_ATTR_IEEE/DCB_ATTR_IEEE_APP_TABLE: %s: "
		       "message ignored", msg, why);
		return -1;
	}
	return 0;
}

enum dcbapp_parsed dcbapp_parse_dcb(const struct dcbapp_msg *m,
				    struct dcbapp_table *t,
				    const struct dcbapp_report *r)
{
	const size_t hdr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct dcbmsg));
	struct attr a, ieee = { 0 }, tab = { 0 };
	bool has_ifname = false, has_ieee = false, has_tab = false;
	char msg[96], why[160];
	struct dcbmsg d;
	size_t off;
	int rc;

	t->ifname[0] = '\0';
	t->n = t->nfrozen = 0;
	snprintf(msg, sizeof(msg), "%s seq %u",
		 m->type == RTM_SETDCB ? "RTM_SETDCB" :
		 m->type == RTM_GETDCB ? "RTM_GETDCB" : "message", m->seq);
	if (m->type != RTM_SETDCB && m->type != RTM_GETDCB) {
		report(r, "%s: type %u is not a DCB message", msg, m->type);
		return DCBAPP_MALFORMED;
	}
	if (m->len < hdr) {
		report(r, "%s: %zu bytes, too short for a struct dcbmsg: "
		       "message ignored", msg, m->len);
		return DCBAPP_MALFORMED;
	}
	memcpy(&d, m->data + NLMSG_HDRLEN, sizeof(d));
	t->cmd = d.cmd;
	snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), " cmd %s",
		 cmd_name(d.cmd));
	if (d.cmd != DCB_CMD_IEEE_GET && d.cmd != DCB_CMD_IEEE_SET &&
	    d.cmd != DCB_CMD_IEEE_DEL)
		return DCBAPP_OTHER;

	off = hdr;
	while ((rc = next_attr(m->data, m->len, &off, &a, why,
			       sizeof(why))) > 0) {
		if (a.type == DCB_ATTR_IFNAME) {
			if (!attr_ifname(&a, t->ifname, why, sizeof(why))) {
				report(r, "%s: DCB_ATTR_IFNAME: %s: message "
				       "ignored", msg, why);
				return DCBAPP_MALFORMED;
			}
			has_ifname = true;
		} else if (a.type == DCB_ATTR_IEEE) {
			ieee = a;	/* the last one, as nla_parse() does */
			has_ieee = true;
		}
	}
	if (rc < 0) {
		report(r, "%s: %s: message ignored", msg, why);
		return DCBAPP_MALFORMED;
	}
	if (!has_ifname) {
		report(r, "%s: no DCB_ATTR_IFNAME: message ignored", msg);
		return DCBAPP_MALFORMED;
	}
	snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), " (%s)",
		 t->ifname);
	if (!has_ieee) {
		report(r, "%s: no DCB_ATTR_IEEE: message ignored", msg);
		return DCBAPP_MALFORMED;
	}
	off = 0;
	while ((rc = next_attr(ieee.data, ieee.len, &off, &a, why,
			       sizeof(why))) > 0) {
		if (a.type == DCB_ATTR_IEEE_APP_TABLE) {
			tab = a;
			has_tab = true;
		}
	}
	if (rc < 0) {
		report(r, "%s: DCB_ATTR_IEEE: %s: message ignored", msg, why);
		return DCBAPP_MALFORMED;
	}
	if (!has_tab) {
		report(r, "%s: DCB_ATTR_IEEE: no DCB_ATTR_IEEE_APP_TABLE: "
		       "message ignored", msg);
		return DCBAPP_MALFORMED;
	}
	if (parse_app_table(&tab, t, msg, r) < 0) {
		t->n = t->nfrozen = 0;
		return DCBAPP_MALFORMED;
	}
	return DCBAPP_TABLE;
}

int dcbapp_parse_link(const struct dcbapp_msg *m, struct dcbapp_link *l,
		      const struct dcbapp_report *r)
{
	const size_t hdr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct ifinfomsg));
	const char *what = m->type == RTM_DELLINK ? "RTM_DELLINK" :
			   "RTM_NEWLINK";
	struct ifinfomsg ifi;
	bool has_name = false;
	char why[160];
	struct attr a;
	size_t off;
	int rc;

	if (m->len < hdr) {
		report(r, "%s seq %u: %zu bytes, too short for a struct "
		       "ifinfomsg: message ignored", what, m->seq, m->len);
		return -1;
	}
	memcpy(&ifi, m->data + NLMSG_HDRLEN, sizeof(ifi));
	l->del = m->type == RTM_DELLINK;
	l->ifindex = ifi.ifi_index;
	l->ifname[0] = '\0';
	off = hdr;
	while ((rc = next_attr(m->data, m->len, &off, &a, why,
			       sizeof(why))) > 0) {
		if (a.type != IFLA_IFNAME)
			continue;
		if (!attr_ifname(&a, l->ifname, why, sizeof(why))) {
			report(r, "%s seq %u ifindex %d: IFLA_IFNAME: %s: "
			       "message ignored", what, m->seq, l->ifindex,
			       why);
			return -1;
		}
		has_name = true;
	}
	if (rc < 0) {
		report(r, "%s seq %u ifindex %d: %s: message ignored", what,
		       m->seq, l->ifindex, why);
		return -1;
	}
	if (!has_name) {
		report(r, "%s seq %u ifindex %d: no IFLA_IFNAME: message "
		       "ignored", what, m->seq, l->ifindex);
		return -1;
	}
	return 0;
}

int dcbapp_parse_error(const struct dcbapp_msg *m, int *err, uint32_t *seq,
		       const struct dcbapp_report *r)
{
	struct nlmsgerr e;

	if (m->len < NLMSG_HDRLEN + sizeof(e)) {
		report(r, "NLMSG_ERROR seq %u: %zu bytes, too short for a "
		       "struct nlmsgerr: message ignored", m->seq, m->len);
		return -1;
	}
	memcpy(&e, m->data + NLMSG_HDRLEN, sizeof(e));
	*err = -e.error;
	*seq = e.msg.nlmsg_seq;
	return 0;
}

size_t dcbapp_build_ieee_get(uint8_t *buf, size_t size, const char *ifname,
			     uint32_t seq)
{
	size_t name_len = strlen(ifname) + 1;
	size_t hdr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct dcbmsg));
	size_t len = hdr + NLA_ALIGN(NLA_HDRLEN + name_len);
	struct nlmsghdr h = {
		.nlmsg_len = len, .nlmsg_type = RTM_GETDCB,
		.nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = seq,
	};
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = DCB_CMD_IEEE_GET };
	struct nlattr a = { .nla_len = NLA_HDRLEN + name_len,
			    .nla_type = DCB_ATTR_IFNAME };

	if (len > size || name_len > IFNAMSIZ)
		return 0;
	memset(buf, 0, len);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + NLMSG_HDRLEN, &d, sizeof(d));
	memcpy(buf + hdr, &a, sizeof(a));
	memcpy(buf + hdr + NLA_HDRLEN, ifname, name_len);
	return len;
}

/* ---- printing ---- */

static const char *const event_names[] = {
	[DCBAPP_EV_APP] = "app", [DCBAPP_EV_APP_GONE] = "app_gone",
	[DCBAPP_EV_MULTI] = "multiple_priorities",
	[DCBAPP_EV_CREATED] = "created", [DCBAPP_EV_REMOVED] = "removed",
	[DCBAPP_EV_KEPT] = "kept", [DCBAPP_EV_RULE] = "nft_rule",
	[DCBAPP_EV_RULE_GONE] = "nft_rule_gone",
	[DCBAPP_EV_NFT_REMOVED] = "nft_removed",
	[DCBAPP_EV_MALFORMED] = "malformed",
	[DCBAPP_EV_ERROR] = "error", [DCBAPP_EV_INFO] = "info",
	[DCBAPP_EV_DEBUG] = "debug",
};

static void print_app(const struct dcbapp_event *ev)
{
	if (ev->port && ev->port[0])
		print_string(PRINT_ANY, "port", "%s: ", ev->port);
	print_uint(PRINT_ANY, "selector", "app sel %llu", ev->app.selector);
	print_uint(PRINT_ANY, "protocol", " proto %llu", ev->app.protocol);
}

static void print_map(const struct dcbapp_event *ev)
{
	print_string(PRINT_ANY, "cgroup", ": cgroup %s", ev->cgroup);
	if (!ev->ndevs)
		print_text(": its devices are gone");
	else
		print_text(" ifpriomap");
	open_json_array("ifpriomap");
	for (int i = 0; i < ev->ndevs; i++) {
		open_json_object(NULL);
		print_string(PRINT_ANY, "dev", i ? ", %s" : " %s",
			     ev->devs[i]);
		print_uint(PRINT_ANY, "prio", " %llu", ev->prios[i]);
		close_json_object();
	}
	close_json_array();
}

/*
 * The transport protocols of a port selector (2, 3, 4): as the log says
 * them, and as nft's set of meta l4proto (nft keywords, no /etc/protocols
 * needed: the guests have none).  NULL for the other selectors.
 */
static const char *l4_names(unsigned int selector, bool nft)
{
	switch (selector) {
	case IEEE_8021QAZ_APP_SEL_STREAM:
		return nft ? "{ tcp, sctp }" : "tcp/sctp";
	case IEEE_8021QAZ_APP_SEL_DGRAM:
		return nft ? "{ udp, dccp }" : "udp/dccp";
	case IEEE_8021QAZ_APP_SEL_ANY:
		return nft ? "{ tcp, udp, sctp, dccp }" : "tcp/udp/sctp/dccp";
	default:
		return NULL;
	}
}

/*
 * What the rules of (selector, protocol) match, text only (the JSON has
 * the selector and protocol): "dscp 26", "udp/dccp dport 4791".
 */
static void print_rule_match(unsigned int selector, unsigned int protocol)
{
	if (selector == IEEE_8021QAZ_APP_SEL_DSCP)
		print_text("dscp %u", protocol);
	else
		print_text("%s dport %u", l4_names(selector, false), protocol);
}

/* The devices whose nft rule an event is about. */
static void print_rule_devs(const struct dcbapp_event *ev)
{
	open_json_array("devs");
	for (int i = 0; i < ev->ndevs; i++)
		print_string(PRINT_ANY, NULL, i ? ", %s" : " %s", ev->devs[i]);
	close_json_array();
}

void dcbapp_print_event(FILE *fp, bool json, const struct dcbapp_event *ev)
{
	new_json_obj(fp, json);
	print_text("%s: ", progname);
	print_string(PRINT_JSON, "event", NULL, event_names[ev->kind]);
	switch (ev->kind) {
	case DCBAPP_EV_APP:
		print_app(ev);
		print_uint(PRINT_ANY, "priority", " prio %llu",
			   ev->app.priority);
		print_map(ev);
		break;
	case DCBAPP_EV_APP_GONE:
		print_app(ev);
		print_text(" gone");
		print_map(ev);
		break;
	case DCBAPP_EV_MULTI:
		print_app(ev);
		print_text(" has priorities");
		open_json_array("priorities");
		for (int p = 0; p < 8; p++)
			if (ev->prio_mask & 1 << p)
				print_uint(PRINT_ANY, NULL, " %llu", p);
		close_json_array();
		print_uint(PRINT_ANY, "priority", ": using the highest, %llu",
			   ev->app.priority);
		break;
	case DCBAPP_EV_CREATED:
		print_string(PRINT_ANY, "cgroup", "cgroup %s created",
			     ev->cgroup);
		break;
	case DCBAPP_EV_REMOVED:
		print_string(PRINT_ANY, "cgroup", "cgroup %s removed",
			     ev->cgroup);
		break;
	case DCBAPP_EV_KEPT:
		print_string(PRINT_ANY, "cgroup", "cgroup %s kept", ev->cgroup);
		print_int(PRINT_ANY, "tasks", ": %lld task(s) in it, their "
			  "traffic falls back to priority 0; removed once "
			  "empty", ev->tasks);
		break;
	case DCBAPP_EV_RULE:
		print_app(ev);
		print_uint(PRINT_ANY, "priority", " prio %llu",
			   ev->app.priority);
		print_text(": nft ");
		print_rule_match(ev->app.selector, ev->app.protocol);
		print_uint(PRINT_FP, NULL, " priority %llu on",
			   ev->app.priority);
		print_rule_devs(ev);
		break;
	case DCBAPP_EV_RULE_GONE:
		print_app(ev);
		print_text(" gone: nft ");
		print_rule_match(ev->app.selector, ev->app.protocol);
		print_text(" rule removed on");
		print_rule_devs(ev);
		break;
	case DCBAPP_EV_NFT_REMOVED:
		print_string(PRINT_ANY, "table", "nft table %s removed",
			     DCBAPP_NFT_TABLE);
		break;
	default:
		print_string(PRINT_ANY, "message", "%s", ev->text);
	}
	if (ev->dry_run) {
		print_text(" (dry run)");
		print_uint(PRINT_JSON, "dry_run", NULL, 1);
	}
	print_text("\n");
	delete_json_obj();
}

void dcbapp_print_state(FILE *fp, bool json, const struct dcbapp_state *s)
{
	new_json_obj(fp, json);
	if (!s->nports && !s->ncgroups && !s->nrules)
		print_text("no DCB APP table, no %s* cgroup\n", DCBAPP_PREFIX);
	open_json_array("ports");
	for (int i = 0; i < s->nports; i++) {
		const struct dcbapp_port *p = &s->ports[i];

		open_json_object(NULL);
		print_string(PRINT_ANY, "port", "port %s:", p->name);
		open_json_array("app");
		for (int j = 0; j < p->n; j++) {
			open_json_object(NULL);
			print_uint(PRINT_ANY, "selector", " sel %llu",
				   p->e[j].selector);
			print_uint(PRINT_ANY, "protocol", " proto %llu",
				   p->e[j].protocol);
			print_uint(PRINT_ANY, "priority", " prio %llu",
				   p->e[j].priority);
			print_text(j + 1 < p->n ? "," : "");
			close_json_object();
		}
		close_json_array();
		print_text("\n");
		close_json_object();
	}
	close_json_array();
	open_json_array("cgroups");
	for (int i = 0; i < s->ncgroups; i++) {
		const struct dcbapp_cgroup *c = &s->cgroups[i];

		open_json_object(NULL);
		print_string(PRINT_ANY, "cgroup", "cgroup %s", c->name);
		print_uint(PRINT_ANY, "selector", " sel %llu", c->key.selector);
		print_uint(PRINT_ANY, "protocol", " proto %llu",
			   c->key.protocol);
		print_text(" ifpriomap");
		open_json_array("ifpriomap");
		for (int j = 0; j < c->ndevs; j++) {
			open_json_object(NULL);
			print_string(PRINT_ANY, "dev", j ? ", %s" : " %s",
				     c->devs[j].name);
			print_uint(PRINT_ANY, "prio", " %llu", c->devs[j].prio);
			close_json_object();
		}
		close_json_array();
		print_text("\n");
		close_json_object();
	}
	close_json_array();
	/*
	 * Only when there are rules: without DSCP or port entries the
	 * object is what it was before the engine made any.
	 */
	if (s->nrules)
		open_json_array("nft_rules");
	for (int i = 0; i < s->nrules; i++) {
		const struct dcbapp_rule *r = &s->rules[i];

		open_json_object(NULL);
		print_string(PRINT_ANY, "dev", "nft oifname %s ", r->dev);
		print_uint(PRINT_JSON, "selector", NULL, r->selector);
		print_uint(PRINT_JSON, "protocol", NULL, r->protocol);
		print_rule_match(r->selector, r->protocol);
		print_uint(PRINT_ANY, "priority", " priority %llu", r->prio);
		print_string(PRINT_ANY, "port", " (port %s)\n", r->port);
		close_json_object();
	}
	if (s->nrules)
		close_json_array();
	delete_json_obj();
}

/* ---- the engine ---- */

static void emit(struct dcbapp_state *s, struct dcbapp_event *ev)
{
	/* The kinds up to NFT_REMOVED are changes; --dry-run made none. */
	ev->dry_run = s->cfg.dry_run && ev->kind <= DCBAPP_EV_NFT_REMOVED;
	if (s->cfg.log)
		s->cfg.log(s->cfg.log_ctx, ev);
}

/* The engine's own free-text lines use the public name through this. */
#define logf_(s, ...)	dcbapp_logf(s, __VA_ARGS__)

void dcbapp_logf(struct dcbapp_state *s, enum dcbapp_event_kind kind,
		 const char *fmt, ...)
{
	struct dcbapp_event ev = { .kind = kind };
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ev.text = line;
	if (kind == DCBAPP_EV_ERROR)
		s->errors++;
	emit(s, &ev);
}

void dcbapp_init(struct dcbapp_state *s, const struct dcbapp_config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
}

static bool same_key(const struct dcbapp_entry *a, const struct dcbapp_entry *b)
{
	return a->selector == b->selector && a->protocol == b->protocol;
}

/* The priorities port p holds for key, one bit each. */
static uint8_t prio_mask(const struct dcbapp_port *p,
			 const struct dcbapp_entry *key)
{
	uint8_t mask = 0;

	for (int i = 0; p && i < p->n; i++)
		if (same_key(&p->e[i], key))
			mask |= 1 << p->e[i].priority;
	return mask;
}

static int highest(uint8_t mask)
{
	int p = -1;

	for (int i = 0; i < 8; i++)
		if (mask & 1 << i)
			p = i;
	return p;
}

static struct dcbapp_port *find_port(struct dcbapp_state *s, const char *name)
{
	for (int i = 0; i < s->nports; i++)
		if (!strcmp(s->ports[i].name, name))
			return &s->ports[i];
	return NULL;
}

void dcbapp_set_table(struct dcbapp_state *s, const struct dcbapp_table *t)
{
	static struct dcbapp_port next;
	struct dcbapp_port *old = find_port(s, t->ifname);

	memset(&next, 0, sizeof(next));
	snprintf(next.name, sizeof(next.name), "%s", t->ifname);
	for (int i = 0; i < t->n; i++)
		if (!has_entry(t->frozen, t->nfrozen, &t->e[i], false))
			next.e[next.n++] = t->e[i];
	for (int i = 0; old && i < old->n; i++)
		if (has_entry(t->frozen, t->nfrozen, &old->e[i], false) &&
		    next.n < DCBAPP_MAX_ENTRIES)
			next.e[next.n++] = old->e[i];

	for (int i = 0; i < next.n; i++) {
		uint8_t mask = prio_mask(&next, &next.e[i]);
		struct dcbapp_event ev = { .kind = DCBAPP_EV_MULTI,
					   .port = next.name };

		/* Once per entry and table: at its first priority's place. */
		if (!(mask & (mask - 1)) || mask == prio_mask(old, &next.e[i]))
			continue;
		bool first = true;

		for (int j = 0; j < i; j++)
			if (same_key(&next.e[j], &next.e[i]))
				first = false;
		if (!first)
			continue;
		ev.app = next.e[i];
		ev.app.priority = highest(mask);
		ev.prio_mask = mask;
		emit(s, &ev);
	}

	if (!old) {
		if (s->nports == DCBAPP_MAX_PORTS) {
			logf_(s, DCBAPP_EV_ERROR, "%s: more than %d DCB ports: "
			      "its table is ignored", t->ifname,
			      DCBAPP_MAX_PORTS);
			return;
		}
		old = &s->ports[s->nports++];
	}
	*old = next;
}

void dcbapp_drop_port(struct dcbapp_state *s, const char *port)
{
	struct dcbapp_port *p = find_port(s, port);

	if (p)
		*p = s->ports[--s->nports];
}

/* base/a or base/a/b; -1 when that is longer than size. */
static int path_of(char *buf, size_t size, const char *base, const char *a,
		   const char *b)
{
	int n = snprintf(buf, size, "%s/%s%s%s", base, a, b ? "/" : "",
			 b ? b : "");

	return n < 0 || (size_t)n >= size ? -1 : 0;
}

static bool dev_exists(const struct dcbapp_state *s, const char *dev)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/class/net/%s", s->cfg.sysfs, dev);
	return !stat(path, &st);
}

static bool is_vlan(const struct dcbapp_state *s, const char *dev)
{
	char path[PATH_MAX], line[256];
	bool vlan = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/class/net/%s/uevent", s->cfg.sysfs,
		 dev);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!vlan && fgets(line, sizeof(line), f))
		vlan = !strcmp(line, "DEVTYPE=vlan\n") ||
		       !strcmp(line, "DEVTYPE=vlan");
	fclose(f);
	return vlan;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * The port (if it exists) and the VLAN devices stacked on it, VLANs on
 * VLANs included, the VLANs sorted by name: the devices whose ifpriomap
 * line decides the priority of the port's traffic.
 */
static int port_devices(const struct dcbapp_state *s, const char *port,
			char devs[DCBAPP_MAX_DEVS][IFNAMSIZ])
{
	int n = 0;

	if (!dev_exists(s, port))
		return 0;
	snprintf(devs[n++], IFNAMSIZ, "%s", port);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "%s/class/net/%s", s->cfg.sysfs,
			 devs[i]);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d)) && n < DCBAPP_MAX_DEVS) {
			const char *up = de->d_name + strlen("upper_");
			bool seen = false;

			if (strncmp(de->d_name, "upper_", 6) ||
			    !dcbapp_valid_ifname(up) || !is_vlan(s, up))
				continue;
			for (int j = 0; j < n; j++)
				seen |= !strcmp(devs[j], up);
			if (!seen)
				snprintf(devs[n++], IFNAMSIZ, "%s", up);
		}
		closedir(d);
	}
	qsort(devs + 1, n - 1, IFNAMSIZ, cmp_name);
	return n;
}

static int write_map(struct dcbapp_state *s, struct dcbapp_cgroup *c,
		     const char *dev, unsigned int prio)
{
	char path[PATH_MAX], line[IFNAMSIZ + 8];
	int fd, n, err = 0;

	if (s->cfg.dry_run)
		return 0;
	n = snprintf(line, sizeof(line), "%s %u\n", dev, prio);
	if (path_of(path, sizeof(path), s->cfg.cgroot, c->name,
		    "net_prio.ifpriomap"))
		err = ENAMETOOLONG;
	else if ((fd = open(path, O_WRONLY | O_CLOEXEC |
			    (s->cfg.fake_cgroupfs ? O_APPEND : 0))) < 0)
		err = errno;
	else {
		if (write(fd, line, n) != n)
			err = errno ? errno : EIO;
		if (close(fd) && !err)
			err = errno;
	}
	if (err)
		logf_(s, DCBAPP_EV_ERROR, "%s/%s/net_prio.ifpriomap: writing "
		      "'%s %u': %s", s->cfg.cgroot, c->name, dev, prio,
		      strerror(err));
	return err;
}

static int make_cgroup(struct dcbapp_state *s, struct dcbapp_cgroup *c)
{
	static const char *const files[] = { "net_prio.ifpriomap",
					     "cgroup.procs" };
	char path[PATH_MAX];

	if (s->cfg.dry_run)
		return 0;
	path_of(path, sizeof(path), s->cfg.cgroot, c->name, NULL);
	if (mkdir(path, 0755) && errno != EEXIST) {
		logf_(s, DCBAPP_EV_ERROR, "%s: mkdir: %s", path,
		      strerror(errno));
		return -1;
	}
	for (size_t i = 0; s->cfg.fake_cgroupfs && i < ARRAY_SIZE(files);
	     i++) {
		int fd;

		path_of(path, sizeof(path), s->cfg.cgroot, c->name,
			files[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

/* The tasks in the cgroup; 0 when it is not there; -1 on errors. */
static long count_tasks(struct dcbapp_state *s, struct dcbapp_cgroup *c)
{
	char path[PATH_MAX];
	long n = 0;
	FILE *f;
	int ch;

	path_of(path, sizeof(path), s->cfg.cgroot, c->name,
		"cgroup.procs");
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		logf_(s, DCBAPP_EV_ERROR, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static void forget_cgroup(struct dcbapp_state *s, struct dcbapp_cgroup *c)
{
	*c = s->cgroups[--s->ncgroups];
}

/* Remove c if no task is in it; true when it is gone. */
static bool remove_cgroup(struct dcbapp_state *s, struct dcbapp_cgroup *c)
{
	struct dcbapp_event ev = { .kind = DCBAPP_EV_REMOVED,
				   .cgroup = c->name };
	char path[PATH_MAX];
	long tasks;

	if (!c->exists)
		return true;
	tasks = count_tasks(s, c);
	if (tasks < 0)
		return false;
	if (tasks > 0) {
		if (!c->kept_logged || tasks != c->kept_tasks) {
			ev.kind = DCBAPP_EV_KEPT;
			ev.tasks = tasks;
			emit(s, &ev);
		}
		c->kept_logged = true;
		c->kept_tasks = tasks;
		return false;
	}
	if (!s->cfg.dry_run) {
		if (s->cfg.fake_cgroupfs) {
			path_of(path, sizeof(path), s->cfg.cgroot, c->name,
				"net_prio.ifpriomap");
			unlink(path);
			path_of(path, sizeof(path), s->cfg.cgroot, c->name,
				"cgroup.procs");
			unlink(path);
		}
		path_of(path, sizeof(path), s->cfg.cgroot, c->name, NULL);
		if (rmdir(path) && errno != ENOENT) {
			if (!c->kept_logged)
				logf_(s, DCBAPP_EV_ERROR, "%s: rmdir: %s",
				      path, strerror(errno));
			c->kept_logged = true;
			return false;
		}
	}
	emit(s, &ev);
	c->exists = false;
	return true;
}

static struct dcbapp_cgroup *find_cgroup(struct dcbapp_state *s,
					 const struct dcbapp_entry *key,
					 bool add)
{
	struct dcbapp_cgroup *c;

	for (int i = 0; i < s->ncgroups; i++)
		if (same_key(&s->cgroups[i].key, key))
			return &s->cgroups[i];
	if (!add)
		return NULL;
	if (s->ncgroups == DCBAPP_MAX_CGROUPS) {
		logf_(s, DCBAPP_EV_ERROR, "app sel %u proto %u: more than %d "
		      "cgroups: entry ignored", key->selector, key->protocol,
		      DCBAPP_MAX_CGROUPS);
		return NULL;
	}
	c = &s->cgroups[s->ncgroups++];
	memset(c, 0, sizeof(*c));
	c->key = *key;
	c->key.priority = 0;
	snprintf(c->name, sizeof(c->name), DCBAPP_PREFIX "%u-%u",
		 key->selector, key->protocol);
	return c;
}

static struct dcbapp_dev *applied(struct dcbapp_cgroup *c, const char *dev)
{
	for (int i = 0; i < c->ndevs; i++)
		if (!strcmp(c->devs[i].name, dev))
			return &c->devs[i];
	return NULL;
}

/* The devices of every port, found once per reconcile. */
struct port_devs {
	int n;
	char devs[DCBAPP_MAX_DEVS][IFNAMSIZ];
};

static bool wanted(const struct dcbapp_state *s, const struct port_devs *pd,
		   const struct dcbapp_cgroup *c, const char *dev)
{
	for (int i = 0; i < s->nports; i++) {
		if (!prio_mask(&s->ports[i], &c->key))
			continue;
		for (int j = 0; j < pd[i].n; j++)
			if (!strcmp(pd[i].devs[j], dev))
				return true;
	}
	return false;
}

/* Set each device of port i to its priority for c; one line if any changed. */
static void apply_port(struct dcbapp_state *s, struct dcbapp_cgroup *c,
		       int i, const struct port_devs *pd)
{
	const struct dcbapp_port *p = &s->ports[i];
	int prio = highest(prio_mask(p, &c->key));
	struct dcbapp_event ev = { .kind = DCBAPP_EV_APP, .port = p->name,
				   .cgroup = c->name, .app = c->key };
	bool changed = false;

	if (prio < 0 || !pd->n)
		return;
	ev.app.priority = prio;
	for (int j = 0; j < pd->n; j++) {
		const char *dev = pd->devs[j];
		struct dcbapp_dev *a = applied(c, dev);

		ev.devs[ev.ndevs] = dev;
		ev.prios[ev.ndevs++] = prio;
		if (a && a->prio == prio && !strcmp(a->port, p->name))
			continue;
		if (!a && c->ndevs == DCBAPP_MAX_DEVS) {
			logf_(s, DCBAPP_EV_ERROR, "cgroup %s: more than %d "
			      "devices: %s left out", c->name, DCBAPP_MAX_DEVS,
			      dev);
			continue;
		}
		changed = true;
		if (write_map(s, c, dev, prio))
			continue;
		if (!a)
			a = &c->devs[c->ndevs++];
		snprintf(a->name, sizeof(a->name), "%s", dev);
		snprintf(a->port, sizeof(a->port), "%s", p->name);
		a->prio = prio;
	}
	if (changed)
		emit(s, &ev);
}

/* The port first, then its VLANs by name: the order they were set in. */
static void sort_devs(struct dcbapp_event *ev, const char *port)
{
	for (int a = 0; a < ev->ndevs; a++)
		for (int b = a + 1; b < ev->ndevs; b++) {
			const char *x = ev->devs[a], *y = ev->devs[b];

			if (!strcmp(y, port) ||
			    (strcmp(x, port) && strcmp(x, y) > 0)) {
				ev->devs[a] = y;
				ev->devs[b] = x;
			}
		}
}

/* Back to 0: the devices c set that no port wants now, a line per port. */
static void unapply_stale(struct dcbapp_state *s, struct dcbapp_cgroup *c,
			  const struct port_devs *pd)
{
	while (c->ndevs) {
		struct dcbapp_event ev = { .kind = DCBAPP_EV_APP_GONE,
					   .cgroup = c->name, .app = c->key };
		char port[IFNAMSIZ], names[DCBAPP_MAX_DEVS][IFNAMSIZ];
		bool any = false;
		int k = 0;

		/* The first stale device names the port of this line. */
		for (; k < c->ndevs; k++)
			if (!wanted(s, pd, c, c->devs[k].name))
				break;
		if (k == c->ndevs)
			return;
		snprintf(port, sizeof(port), "%s", c->devs[k].port);
		ev.port = port;
		for (int j = c->ndevs - 1; j >= 0; j--) {
			struct dcbapp_dev *a = &c->devs[j];

			if (strcmp(a->port, port) ||
			    wanted(s, pd, c, a->name))
				continue;
			any = true;
			if (!dev_exists(s, a->name)) {
				logf_(s, DCBAPP_EV_DEBUG, "cgroup %s: %s is "
				      "gone, forgotten", c->name, a->name);
			} else if (!write_map(s, c, a->name, 0)) {
				snprintf(names[ev.ndevs], IFNAMSIZ, "%s",
					 a->name);
				ev.devs[ev.ndevs] = names[ev.ndevs];
				ev.prios[ev.ndevs++] = 0;
			}
			*a = c->devs[--c->ndevs];
		}
		if (!any)
			return;
		/* A device gone under a port that keeps its entry: no line. */
		struct dcbapp_port *p = find_port(s, port);

		if (ev.ndevs || !p || !prio_mask(p, &c->key)) {
			sort_devs(&ev, port);
			emit(s, &ev);
		}
	}
}

/* ---- DSCP and port entries' rules in nftables ---- */

/*
 * A device name nft takes inside "..." as it is: no quote (the string
 * would end), no '*' (a trailing one is a wildcard), no '\' (an escape).
 * The kernel allows more; a device named otherwise gets no rule.
 */
static bool nft_safe_name(const char *name)
{
	for (; *name; name++)
		if (!isalnum((unsigned char)*name) && !strchr("._-@+", *name))
			return false;
	return true;
}

/* An entry of this selector becomes nft rules: a port or a DSCP. */
static bool rule_selector(unsigned int selector)
{
	return selector == IEEE_8021QAZ_APP_SEL_DSCP ||
	       l4_names(selector, false);
}

/* By device, selector, protocol; the highest priority first, then port. */
static int cmp_rule(const void *a, const void *b)
{
	const struct dcbapp_rule *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);

	if (c)
		return c;
	if (x->selector != y->selector)
		return x->selector - y->selector;
	if (x->protocol != y->protocol)
		return x->protocol - y->protocol;
	if (x->prio != y->prio)
		return y->prio - x->prio;
	return strcmp(x->port, y->port);
}

static int cmp_rule_key(const void *a, const void *b)
{
	const struct dcbapp_rule *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);

	if (c)
		return c;
	if (x->selector != y->selector)
		return x->selector - y->selector;
	return x->protocol - y->protocol;
}

/* The rule for key's (dev, selector, protocol) in r[0..n), sorted; or NULL. */
static const struct dcbapp_rule *find_rule(const struct dcbapp_rule *r, int n,
					   const struct dcbapp_rule *key)
{
	return n ? bsearch(key, r, n, sizeof(*r), cmp_rule_key) : NULL;
}

/* The same entry of the same port (one log line covers its devices). */
static bool same_group(const struct dcbapp_rule *a, const struct dcbapp_rule *b)
{
	return a->selector == b->selector && a->protocol == b->protocol &&
	       !strcmp(a->port, b->port);
}

/*
 * The port's entries that become rules, one per (selector, protocol),
 * with the highest of its priorities for the pair; their number.
 */
static int rule_entries(const struct dcbapp_port *p, struct dcbapp_entry *out)
{
	int n = 0;

	for (int j = 0; j < p->n; j++) {
		bool first = rule_selector(p->e[j].selector);

		for (int k = 0; k < j && first; k++)
			first = !same_key(&p->e[k], &p->e[j]);
		if (!first)
			continue;
		out[n] = p->e[j];
		out[n++].priority = highest(prio_mask(p, &p->e[j]));
	}
	return n;
}

/*
 * The rules the ports' DSCP and port entries want, one per (device,
 * selector, protocol), sorted; their number.  A device that is a VLAN of
 * one port and a port itself gets the higher priority.  note[]: a rule
 * left out, or "".
 */
static int want_rules(const struct dcbapp_state *s, const struct port_devs *pd,
		      struct dcbapp_rule *w, char *note, size_t notesz)
{
	static struct dcbapp_entry e[DCBAPP_MAX_ENTRIES];
	int n = 0, m = 0, dropped = 0;

	note[0] = '\0';
	for (int i = 0; i < s->nports; i++) {
		int ne = rule_entries(&s->ports[i], e);

		for (int j = 0; j < ne; j++) {
			for (int k = 0; k < pd[i].n; k++) {
				const char *dev = pd[i].devs[k];

				if (!nft_safe_name(dev)) {
					snprintf(note, notesz, "%s: app sel %u "
						 "proto %u: device '%s': its "
						 "name is not one nft takes "
						 "in quotes as it is: no nft "
						 "rule on it",
						 s->ports[i].name,
						 e[j].selector, e[j].protocol,
						 dev);
					continue;
				}
				if (n == DCBAPP_MAX_RULES) {
					dropped++;
					continue;
				}
				snprintf(w[n].dev, IFNAMSIZ, "%s", dev);
				snprintf(w[n].port, IFNAMSIZ, "%s",
					 s->ports[i].name);
				w[n].selector = e[j].selector;
				w[n].protocol = e[j].protocol;
				w[n].prio = e[j].priority;
				n++;
			}
		}
	}
	if (dropped)
		snprintf(note, notesz, "more than %d nft rules (device, "
			 "entry): %d left out", DCBAPP_MAX_RULES, dropped);
	qsort(w, n, sizeof(*w), cmp_rule);
	for (int i = 0; i < n; i++)
		if (!m || cmp_rule_key(&w[m - 1], &w[i]))
			w[m++] = w[i];
	return m;
}

/* Equal (dev, selector, protocol, prio) lists render the same script. */
static bool same_script(const struct dcbapp_rule *a, int na,
			const struct dcbapp_rule *b, int nb)
{
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++)
		if (cmp_rule_key(&a[i], &b[i]) || a[i].prio != b[i].prio)
			return false;
	return true;
}

/*
 * An nft problem: counted every time, logged when it is not the one
 * logged last, since a failing script is retried at every reconcile (every
 * second in the daemon) and one line says it.
 */
static void nft_problem(struct dcbapp_state *s, const char *line)
{
	if (!strcmp(line, s->nft_error)) {
		s->errors++;
		logf_(s, DCBAPP_EV_DEBUG, "%s (again)", line);
		return;
	}
	snprintf(s->nft_error, sizeof(s->nft_error), "%s", line);
	logf_(s, DCBAPP_EV_ERROR, "%s", line);
}

/* The script for r[0..n), malloc'ed; NULL (logged) when out of memory. */
static char *render(struct dcbapp_state *s, const struct dcbapp_rule *r, int n)
{
	size_t len = dcbapp_nft_script(NULL, 0, r, n);
	char *script = malloc(len + 1);

	if (!script) {
		logf_(s, DCBAPP_EV_ERROR, "nft table %s: a script of %zu "
		      "bytes: out of memory", DCBAPP_NFT_TABLE, len);
		return NULL;
	}
	dcbapp_nft_script(script, len + 1, r, n);
	return script;
}

/* The events of going from the applied rules to w[0..nw). */
static void log_rule_changes(struct dcbapp_state *s,
			     const struct dcbapp_rule *w, int nw)
{
	/* Rules no longer wanted: a line per (port, selector, protocol). */
	for (int i = 0; i < s->nrules; i++) {
		const struct dcbapp_rule *a = &s->rules[i];
		struct dcbapp_event ev = {
			.kind = DCBAPP_EV_RULE_GONE, .port = a->port,
			.app = { a->selector, 0, a->protocol } };
		bool first = true;

		if (find_rule(w, nw, a))
			continue;
		for (int j = 0; j < i && first; j++)
			first = !same_group(&s->rules[j], a) ||
				find_rule(w, nw, &s->rules[j]);
		if (!first)
			continue;
		for (int j = i; j < s->nrules && ev.ndevs < DCBAPP_MAX_DEVS;
		     j++)
			if (same_group(&s->rules[j], a) &&
			    !find_rule(w, nw, &s->rules[j]))
				ev.devs[ev.ndevs++] = s->rules[j].dev;
		/* A device gone under a port that keeps its entry: no line. */
		if (prio_mask(find_port(s, a->port), &ev.app)) {
			logf_(s, DCBAPP_EV_DEBUG, "%s: nft app sel %u proto "
			      "%u: the rule on %s%s removed, device gone",
			      a->port, a->selector, a->protocol, a->dev,
			      ev.ndevs > 1 ? " and others" : "");
			continue;
		}
		sort_devs(&ev, a->port);
		emit(s, &ev);
	}
	/*
	 * A line per (port, selector, protocol) with a device new or
	 * changed: all of its devices, as the cgroup lines have them.
	 */
	for (int i = 0; i < nw; i++) {
		struct dcbapp_event ev = {
			.kind = DCBAPP_EV_RULE, .port = w[i].port,
			.app = { w[i].selector, w[i].prio, w[i].protocol } };
		bool first = true, changed = false;

		for (int j = 0; j < i && first; j++)
			first = !same_group(&w[j], &w[i]);
		if (!first)
			continue;
		for (int j = i; j < nw; j++) {
			const struct dcbapp_rule *a;

			if (!same_group(&w[j], &w[i]))
				continue;
			a = find_rule(s->rules, s->nrules, &w[j]);
			changed |= !a || a->prio != w[j].prio ||
				   strcmp(a->port, w[j].port);
			if (ev.ndevs < DCBAPP_MAX_DEVS)
				ev.devs[ev.ndevs++] = w[j].dev;
		}
		if (!changed)
			continue;
		sort_devs(&ev, w[i].port);
		emit(s, &ev);
	}
}

/* Bring table inet dcbapp in line with the ports' DSCP and port entries. */
static void apply_rules(struct dcbapp_state *s, const struct port_devs *pd)
{
	static struct dcbapp_rule w[DCBAPP_MAX_RULES];
	char note[160], why[256], line[sizeof(s->nft_error)];
	char *script;
	int nw;

	if (!s->cfg.nft)
		return;
	nw = want_rules(s, pd, w, note, sizeof(note));
	if (note[0])
		nft_problem(s, note);
	if (same_script(w, nw, s->rules, s->nrules)) {
		/* Only whose entry a rule is can differ: nothing to run. */
		memcpy(s->rules, w, nw * sizeof(*w));
		if (!note[0])
			s->nft_error[0] = '\0';
		return;
	}
	script = render(s, w, nw);
	if (!script)
		return;
	if (!s->cfg.dry_run &&
	    s->cfg.nft(s->cfg.nft_ctx, script, why, sizeof(why))) {
		snprintf(line, sizeof(line), "nft table %s: %s: rules not "
			 "changed; will retry", DCBAPP_NFT_TABLE, why);
		nft_problem(s, line);
		free(script);
		return;
	}
	free(script);
	if (!note[0])
		s->nft_error[0] = '\0';
	logf_(s, DCBAPP_EV_DEBUG, "nft table %s: %d rule(s) of (device, "
	      "entry)%s", DCBAPP_NFT_TABLE, nw,
	      s->cfg.dry_run ? " (dry run)" : "");
	log_rule_changes(s, w, nw);
	memcpy(s->rules, w, nw * sizeof(*w));
	s->nrules = nw;
}

/* --cleanup: the table goes if this run left rules in it. */
static void remove_table(struct dcbapp_state *s)
{
	struct dcbapp_event ev = { .kind = DCBAPP_EV_NFT_REMOVED };
	char why[256], *script;

	if (!s->cfg.nft || !s->nrules)
		return;
	script = render(s, NULL, 0);
	if (!script)
		return;
	if (!s->cfg.dry_run &&
	    s->cfg.nft(s->cfg.nft_ctx, script, why, sizeof(why))) {
		logf_(s, DCBAPP_EV_ERROR, "nft table %s: removing it: %s; "
		      "remove it with: nft delete table %s", DCBAPP_NFT_TABLE,
		      why, DCBAPP_NFT_TABLE);
		free(script);
		return;
	}
	free(script);
	s->nrules = 0;
	emit(s, &ev);
}

void dcbapp_reconcile(struct dcbapp_state *s)
{
	static struct port_devs pd[DCBAPP_MAX_PORTS];

	for (int i = 0; i < s->nports; i++) {
		pd[i].n = port_devices(s, s->ports[i].name, pd[i].devs);
		for (int j = 0; j < s->ports[i].n; j++)
			find_cgroup(s, &s->ports[i].e[j], true);
	}
	/* A removed cgroup's slot takes the last one, seen next. */
	for (int k = 0; k < s->ncgroups; k++) {
		struct dcbapp_cgroup *c = &s->cgroups[k];
		bool want = false;

		for (int i = 0; i < s->nports; i++)
			want |= prio_mask(&s->ports[i], &c->key) && pd[i].n;
		if (want) {
			c->kept_logged = false;
			if (!c->exists) {
				struct dcbapp_event ev = {
					.kind = DCBAPP_EV_CREATED,
					.cgroup = c->name };

				if (make_cgroup(s, c))
					continue;
				c->exists = true;
				emit(s, &ev);
			}
			for (int i = 0; i < s->nports; i++)
				apply_port(s, c, i, &pd[i]);
		}
		unapply_stale(s, c, pd);
		if (!want && !c->ndevs && remove_cgroup(s, c)) {
			forget_cgroup(s, c);
			k--;
		}
	}
	apply_rules(s, pd);
}

void dcbapp_cleanup(struct dcbapp_state *s)
{
	for (int k = s->ncgroups - 1; k >= 0; k--) {
		struct dcbapp_cgroup *c = &s->cgroups[k];

		c->kept_logged = true;	/* no "kept" lines at exit */
		c->kept_tasks = -1;
		if (count_tasks(s, c) == 0 && remove_cgroup(s, c))
			forget_cgroup(s, c);
	}
	remove_table(s);
}

void dcbapp_adopt(struct dcbapp_state *s)
{
	struct dirent *de;
	DIR *d = opendir(s->cfg.cgroot);

	if (!d) {
		logf_(s, DCBAPP_EV_ERROR, "%s: %s", s->cfg.cgroot,
		      strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		struct dcbapp_entry key = { 0 };
		char path[PATH_MAX], dev[64], again[32];
		unsigned int sel, proto, prio;
		struct dcbapp_cgroup *c;
		int end = 0;
		FILE *f;

		if (sscanf(de->d_name, DCBAPP_PREFIX "%3u-%5u%n", &sel, &proto,
			   &end) != 2 || de->d_name[end] || sel > 255 ||
		    proto > 65535)
			continue;
		/* Only our own spelling: not cgdcbx-03-1. */
		snprintf(again, sizeof(again), DCBAPP_PREFIX "%u-%u", sel,
			 proto);
		if (strcmp(again, de->d_name))
			continue;
		key.selector = sel;
		key.protocol = proto;
		c = find_cgroup(s, &key, true);
		if (!c)
			break;
		c->exists = true;
		if (path_of(path, sizeof(path), s->cfg.cgroot, c->name,
			    "net_prio.ifpriomap"))
			continue;
		f = fopen(path, "re");
		if (!f)
			continue;
		/* "dev prio" lines; the last one for a device counts. */
		while (fscanf(f, "%63s %u", dev, &prio) == 2) {
			struct dcbapp_dev *a = applied(c, dev);

			if (!dcbapp_valid_ifname(dev))
				continue;
			if (!a && prio && c->ndevs < DCBAPP_MAX_DEVS) {
				a = &c->devs[c->ndevs++];
				/* valid: shorter than IFNAMSIZ */
				memcpy(a->name, dev, strlen(dev) + 1);
				a->port[0] = '\0';
			}
			if (a)
				a->prio = prio > 7 ? 255 : prio;
			if (a && !prio)
				*a = c->devs[--c->ndevs];
		}
		fclose(f);
		logf_(s, DCBAPP_EV_DEBUG, "cgroup %s found, %d device(s) "
		      "mapped", c->name, c->ndevs);
	}
	closedir(d);
}

/* ---- the nft script and the nft program ---- */

/* snprintf() at *len of buf[size], counting what does not fit. */
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*len < size ? buf + *len : NULL,
		      *len < size ? size - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += n;
}

size_t dcbapp_nft_script(char *buf, size_t size,
			 const struct dcbapp_rule *r, int n)
{
	static const char *const family[] = { "ip", "ip6" };
	size_t len = 0;

	if (size)
		buf[0] = '\0';
	put(buf, size, &len, "table %s {}\n", DCBAPP_NFT_TABLE);
	if (!n) {
		put(buf, size, &len, "delete table %s\n", DCBAPP_NFT_TABLE);
		return len;
	}
	put(buf, size, &len, "flush table %s\n"
	    "table %s {\n"
	    "\tchain output {\n"
	    "\t\ttype filter hook output priority 0; policy accept;\n",
	    DCBAPP_NFT_TABLE, DCBAPP_NFT_TABLE);
	/*
	 * "meta priority none" is nft's name for priority 0 (TC_H_UNSPEC;
	 * tchandle_type_parse() in nftables' src/meta.c, and its
	 * tests/py/any/meta.t has "meta priority none;ok"), so only a packet
	 * without a priority of its own is changed, as net_prio does, and of
	 * the rules a packet matches the first sets its priority: hence the
	 * rules in priority order, highest first.  The value set is a tc
	 * handle, major:minor in hex: 0:N is priority N (N < 8, the same
	 * digit in hex).  The counter, after the guard, shows in
	 * `nft list table inet dcbapp` which rules gave the traffic its
	 * priority.  A port rule: meta l4proto gives nft the transport
	 * header (past IPv6 extension headers too), and th dport is its
	 * bytes 2-3, the destination port in TCP, UDP, SCTP and DCCP alike.
	 */
	for (int prio = 7; prio >= 0; prio--) {
		for (int i = 0; i < n; i++) {
			if (r[i].prio != prio)
				continue;
			if (r[i].selector != IEEE_8021QAZ_APP_SEL_DSCP) {
				put(buf, size, &len, "\t\toifname \"%s\" meta "
				    "l4proto %s th dport %u meta priority "
				    "none counter meta priority set 0:%x\n",
				    r[i].dev, l4_names(r[i].selector, true),
				    r[i].protocol, r[i].prio);
				continue;
			}
			for (size_t f = 0; f < ARRAY_SIZE(family); f++)
				put(buf, size, &len, "\t\toifname \"%s\" %s "
				    "dscp %u meta priority none counter meta "
				    "priority set 0:%x\n", r[i].dev,
				    family[f], r[i].protocol, r[i].prio);
		}
	}
	put(buf, size, &len, "\t}\n}\n");
	return len;
}

#define NFT_TIMEOUT	10	/* seconds */

/* The first line of what fd holds, at most size - 1 bytes of it. */
static void first_line(int fd, char *out, size_t size)
{
	ssize_t n = pread(fd, out, size - 1, 0);
	char *nl;

	out[n > 0 ? n : 0] = '\0';
	nl = strpbrk(out, "\r\n");
	if (nl)
		*nl = '\0';
	if (!out[0])
		snprintf(out, size, "no message");
}

int dcbapp_nft_exec(const char *nft, const char *script, char *why,
		    size_t whysz)
{
	char *const argv[] = { (char *)nft, "-f", "-", NULL };
	size_t len = strlen(script), off = 0;
	int in, err, status = 0, rc = -1;
	char msg[200];
	double deadline;
	pid_t pid, r;

	in = memfd_create("nft-stdin", MFD_CLOEXEC);
	err = memfd_create("nft-stderr", MFD_CLOEXEC);
	if (in < 0 || err < 0) {
		snprintf(why, whysz, "%s -f -: memfd_create: %s", nft,
			 strerror(errno));
		goto out;
	}
	while (off < len) {
		ssize_t n = write(in, script + off, len - off);

		if (n < 0) {
			snprintf(why, whysz, "%s -f -: writing its input: %s",
				 nft, strerror(errno));
			goto out;
		}
		off += n;
	}
	lseek(in, 0, SEEK_SET);
	pid = fork();
	if (pid < 0) {
		snprintf(why, whysz, "%s -f -: fork: %s", nft,
			 strerror(errno));
		goto out;
	}
	if (!pid) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		sigset_t none;

		/* The daemon blocks SIGTERM outside ppoll(); nft must not. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(in, 0);
		dup2(null >= 0 ? null : err, 1);
		dup2(err, 2);
		execv(nft, argv);
		dprintf(2, "cannot run %s: %s (install nftables, or give "
			"--nft PATH)\n", nft, strerror(errno));
		_exit(127);
	}
	deadline = now() + NFT_TIMEOUT;
	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now() < deadline)
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		snprintf(why, whysz, "%s -f -: still running after %d s: "
			 "killed", nft, NFT_TIMEOUT);
		goto out;
	}
	if (r < 0) {
		snprintf(why, whysz, "%s -f -: waitpid: %s", nft,
			 strerror(errno));
		goto out;
	}
	if (WIFEXITED(status) && !WEXITSTATUS(status)) {
		rc = 0;
		goto out;
	}
	first_line(err, msg, sizeof(msg));
	if (WIFEXITED(status))
		snprintf(why, whysz, "%s -f -: exit status %d: %s", nft,
			 WEXITSTATUS(status), msg);
	else
		snprintf(why, whysz, "%s -f -: killed by signal %d: %s", nft,
			 WTERMSIG(status), msg);
out:
	if (in >= 0)
		close(in);
	if (err >= 0)
		close(err);
	return rc;
}
