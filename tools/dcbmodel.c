// SPDX-License-Identifier: GPL-2.0
/* dcbfuzz's requests and the model of 6.1's answers; see dcbmodel.h. */
#include "dcbmodel.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static const char *const category_names[DCM_NCATS] = {
	[DCM_ETS] = "ets", [DCM_ETS_BAD] = "ets_bad", [DCM_PFC] = "pfc",
	[DCM_APP_ADD] = "app_add", [DCM_APP_DEL] = "app_del",
	[DCM_MIXED] = "mixed", [DCM_DCBX] = "dcbx", [DCM_CEE] = "cee",
	[DCM_GET] = "get", [DCM_MALFORMED] = "malformed",
	[DCM_DEVICE] = "device",
};

static const char *const outcome_names[DCM_NOUTCOMES] = {
	[DCM_OK] = "ok", [DCM_ACK_ONLY] = "ack_only",
	[DCM_NL_EINVAL] = "nl_EINVAL", [DCM_NL_ERANGE] = "nl_ERANGE",
	[DCM_NL_ENODEV] = "nl_ENODEV", [DCM_NL_EOPNOTSUPP] = "nl_EOPNOTSUPP",
	[DCM_IEEE_EINVAL] = "ieee_EINVAL", [DCM_IEEE_EBUSY] = "ieee_EBUSY",
	[DCM_IEEE_EEXIST] = "ieee_EEXIST", [DCM_IEEE_ENOENT] = "ieee_ENOENT",
	[DCM_IEEE_ERANGE] = "ieee_ERANGE",
	[DCM_DCBX_REFUSED] = "dcbx_refused", [DCM_OTHER] = "other",
};

const char *dcm_category_name(enum dcm_category c)
{
	return category_names[c];
}

const char *dcm_outcome_name(enum dcm_outcome o)
{
	return outcome_names[o];
}

enum dcm_outcome dcm_nl_outcome(int err)
{
	switch (err) {
	case 0:
		return DCM_OK;
	case 22:	/* EINVAL: numbers, so the host's errno.h is moot */
		return DCM_NL_EINVAL;
	case 34:	/* ERANGE */
		return DCM_NL_ERANGE;
	case 19:	/* ENODEV */
		return DCM_NL_ENODEV;
	case 95:	/* EOPNOTSUPP */
		return DCM_NL_EOPNOTSUPP;
	default:
		return DCM_OTHER;
	}
}

enum dcm_outcome dcm_ieee_outcome(int8_t err)
{
	switch (err) {
	case 0:
		return DCM_OK;
	case -22:
		return DCM_IEEE_EINVAL;
	case -16:	/* EBUSY */
		return DCM_IEEE_EBUSY;
	case -17:	/* EEXIST */
		return DCM_IEEE_EEXIST;
	case -2:	/* ENOENT */
		return DCM_IEEE_ENOENT;
	case -34:
		return DCM_IEEE_ERANGE;
	default:
		return DCM_OTHER;
	}
}

void dcm_dev_init(struct dcm_dev *d, uint8_t q, uint8_t maxq)
{
	memset(d, 0, sizeof(*d));
	d->q = q;
	d->maxq = maxq;
}

/* ---- the device: net/core/dev.c and the driver ---- */

#define PRIOS	IEEE_8021QAZ_MAX_TCS

static unsigned int map_num_tc(const uint8_t *prio_tc)
{
	unsigned int n = 1;

	for (int p = 0; p < PRIOS; p++)
		if (prio_tc[p] + 1u > n)
			n = prio_tc[p] + 1u;
	return n;
}

static void tc_queues(unsigned int queues, unsigned int n, unsigned int tc,
		      uint16_t *count, uint16_t *offset)
{
	unsigned int base = queues / n, extra = queues % n;

	*count = (uint16_t)(base + (tc < extra));
	*offset = (uint16_t)(tc * base + (tc < extra ? tc : extra));
}

static uint8_t prio_of(const uint8_t *prio_tc, int prio)
{
	return prio < PRIOS ? prio_tc[prio] : 0;
}

static bool layout_is(const struct dcm_dev *d, const uint8_t *prio_tc,
		      unsigned int queues)
{
	unsigned int n = map_num_tc(prio_tc);
	uint16_t count, offset;

	if (n == 1 || d->num_tc != n)
		return false;
	for (unsigned int tc = 0; tc < n; tc++) {
		tc_queues(queues, n, tc, &count, &offset);
		if (d->tc[tc].count != count || d->tc[tc].offset != offset)
			return false;
	}
	for (int p = 0; p < DCM_NTC; p++)
		if (d->prio_tc[p] != prio_of(prio_tc, p))
			return false;
	return true;
}

/* The driver holds the layout it set while no mqprio is the root qdisc
 * (the patch looks the root qdisc up: an mqprio's layout equal to the
 * driver's is still the mqprio's).
 */
static bool holds_tc(const struct dcm_dev *d, unsigned int queues)
{
	return d->tc_set && !d->mqprio && layout_is(d, d->ets.prio_tc, queues);
}

static void reset_tc(struct dcm_dev *d)
{
	d->num_tc = 0;
	memset(d->tc, 0, sizeof(d->tc));
	memset(d->prio_tc, 0, sizeof(d->prio_tc));
}

static void apply_tc(struct dcm_dev *d, const uint8_t *prio_tc,
		     unsigned int queues)
{
	unsigned int n = map_num_tc(prio_tc);

	if (n == 1) {
		if (!d->tc_set)
			return;
		reset_tc(d);
		d->tc_set = false;
		return;
	}
	if (d->tc_set && layout_is(d, prio_tc, queues))
		return;
	d->num_tc = (uint8_t)n;
	for (unsigned int tc = 0; tc < n; tc++)
		tc_queues(queues, n, tc, &d->tc[tc].count, &d->tc[tc].offset);
	for (int p = 0; p < DCM_NTC; p++)
		d->prio_tc[p] = prio_of(prio_tc, p);
	d->tc_set = true;
}

static bool tsa_ok(const uint8_t *tsa, const uint8_t *bw)
{
	unsigned int sum = 0;
	bool ets = false;

	for (int tc = 0; tc < PRIOS; tc++) {
		if (tsa[tc] == IEEE_8021QAZ_TSA_ETS) {
			ets = true;
			sum += bw[tc];
		} else if (tsa[tc] != IEEE_8021QAZ_TSA_STRICT) {
			return false;
		}
	}
	return !ets || sum == 100;
}

static bool prio_tc_ok(const uint8_t *prio_tc)
{
	for (int p = 0; p < PRIOS; p++)
		if (prio_tc[p] >= PRIOS)
			return false;
	return true;
}

static enum dcm_outcome setets(struct dcm_dev *d, const struct ieee_ets *e)
{
	unsigned int n, queues = d->q;
	bool holds;

	if (!tsa_ok(e->tc_tsa, e->tc_tx_bw) ||
	    !tsa_ok(e->tc_reco_tsa, e->tc_reco_bw) ||
	    !prio_tc_ok(e->prio_tc) || !prio_tc_ok(e->reco_prio_tc))
		return DCM_IEEE_EINVAL;
	n = map_num_tc(e->prio_tc);
	if (n > queues)
		return DCM_IEEE_EINVAL;
	holds = holds_tc(d, queues);
	if (n > 1 && d->num_tc && !holds)
		return DCM_IEEE_EBUSY;
	d->ets.willing = e->willing;
	memcpy(d->ets.tc_tx_bw, e->tc_tx_bw, sizeof(e->tc_tx_bw));
	memcpy(d->ets.tc_rx_bw, e->tc_rx_bw, sizeof(e->tc_rx_bw));
	memcpy(d->ets.tc_tsa, e->tc_tsa, sizeof(e->tc_tsa));
	memcpy(d->ets.prio_tc, e->prio_tc, sizeof(e->prio_tc));
	memcpy(d->ets.tc_reco_bw, e->tc_reco_bw, sizeof(e->tc_reco_bw));
	memcpy(d->ets.tc_reco_tsa, e->tc_reco_tsa, sizeof(e->tc_reco_tsa));
	memcpy(d->ets.reco_prio_tc, e->reco_prio_tc, sizeof(e->reco_prio_tc));
	if (!holds)
		d->tc_set = false;
	if (holds || !d->num_tc)
		apply_tc(d, e->prio_tc, queues);
	return DCM_OK;
}

static int app_find(const struct dcm_dev *d, const struct dcb_app *a)
{
	for (int i = 0; i < d->napp; i++)
		if (d->app[i].selector == a->selector &&
		    d->app[i].protocol == a->protocol &&
		    d->app[i].priority == a->priority)
			return i;
	return -1;
}

static enum dcm_outcome setapp(struct dcm_dev *d, const struct dcb_app *a)
{
	if (a->selector < IEEE_8021QAZ_APP_SEL_ETHERTYPE ||
	    a->selector > IEEE_8021QAZ_APP_SEL_DSCP || a->priority >= PRIOS ||
	    (a->selector == IEEE_8021QAZ_APP_SEL_DSCP && a->protocol >= 64))
		return DCM_IEEE_EINVAL;
	if (app_find(d, a) >= 0)
		return DCM_IEEE_EEXIST;
	if (d->napp == DCM_APP_MAX)	/* the generator stays far below */
		return DCM_OTHER;
	memmove(&d->app[1], &d->app[0], d->napp * sizeof(d->app[0]));
	d->app[0] = *a;
	d->napp++;
	return DCM_OK;
}

static enum dcm_outcome delapp(struct dcm_dev *d, const struct dcb_app *a)
{
	int i = app_find(d, a);

	if (i < 0)
		return DCM_IEEE_ENOENT;
	memmove(&d->app[i], &d->app[i + 1],
		(d->napp - i - 1) * sizeof(d->app[0]));
	d->napp--;
	return DCM_OK;
}

/* ---- netlink parsing, lib/nlattr.c's liberal rules ---- */

struct attr {
	size_t off;		/* of the header in the message */
	uint16_t type;		/* without the flag bits */
	uint16_t len;		/* payload */
};

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

enum pol { P_NONE, P_U8, P_U16, P_FLAG, P_NESTED, P_NUL_STRING, P_UNSPEC };

struct policy {
	enum pol type;
	uint16_t len;
};

static const struct policy top_policy[DCB_ATTR_MAX + 1] = {
	[DCB_ATTR_IFNAME] = { P_NUL_STRING, IFNAMSIZ - 1 },
	[DCB_ATTR_STATE] = { P_U8, 0 },
	[DCB_ATTR_PFC_CFG] = { P_NESTED, 0 },
	[DCB_ATTR_PG_CFG] = { P_NESTED, 0 },
	[DCB_ATTR_SET_ALL] = { P_U8, 0 },
	[DCB_ATTR_PERM_HWADDR] = { P_FLAG, 0 },
	[DCB_ATTR_CAP] = { P_NESTED, 0 },
	[DCB_ATTR_PFC_STATE] = { P_U8, 0 },
	[DCB_ATTR_BCN] = { P_NESTED, 0 },
	[DCB_ATTR_APP] = { P_NESTED, 0 },
	[DCB_ATTR_IEEE] = { P_NESTED, 0 },
	[DCB_ATTR_DCBX] = { P_U8, 0 },
	[DCB_ATTR_FEATCFG] = { P_NESTED, 0 },
};

static const struct policy ieee_policy[DCB_ATTR_IEEE_MAX + 1] = {
	[DCB_ATTR_IEEE_ETS] = { P_UNSPEC, sizeof(struct ieee_ets) },
	[DCB_ATTR_IEEE_PFC] = { P_UNSPEC, sizeof(struct ieee_pfc) },
	[DCB_ATTR_IEEE_APP_TABLE] = { P_NESTED, 0 },
	[DCB_ATTR_IEEE_MAXRATE] = { P_UNSPEC, sizeof(struct ieee_maxrate) },
	[DCB_ATTR_IEEE_QCN] = { P_UNSPEC, sizeof(struct ieee_qcn) },
	[DCB_ATTR_IEEE_QCN_STATS] = { P_UNSPEC,
				      sizeof(struct ieee_qcn_stats) },
	[DCB_ATTR_DCB_BUFFER] = { P_UNSPEC, sizeof(struct dcbnl_buffer) },
};

static const struct policy app_policy[DCB_APP_ATTR_MAX + 1] = {
	[DCB_APP_ATTR_IDTYPE] = { P_U8, 0 },
	[DCB_APP_ATTR_ID] = { P_U16, 0 },
	[DCB_APP_ATTR_PRIORITY] = { P_U8, 0 },
};

/* validate_nla(): 0, EINVAL (22) or ERANGE (34) */
static int validate(const uint8_t *msg, const struct attr *a,
		    const struct policy *pt)
{
	const uint8_t *data = msg + a->off + NLA_HDRLEN;
	unsigned int len = a->len, minlen;

	switch (pt->type) {
	case P_NONE:
		return 0;
	case P_FLAG:
		return len > 0 ? 34 : 0;
	case P_U8:
		return len < 1 ? 34 : 0;
	case P_U16:
		return len < 2 ? 34 : 0;
	case P_NESTED:
		return len > 0 && len < NLA_HDRLEN ? 34 : 0;
	case P_NUL_STRING:
		minlen = len < pt->len + 1u ? len : pt->len + 1u;
		if (!minlen || !memchr(data, '\0', minlen))
			return 22;
		if (data[len - 1] == '\0')
			len--;
		return len > pt->len ? 34 : 0;
	case P_UNSPEC:
		return len < pt->len ? 34 : 0;
	}
	return 0;
}

/*
 * __nla_parse() of [start, start + len) of msg (msglen bytes): tb[type]
 * the last attribute of each type; 0 or the first error.
 */
static int parse(const uint8_t *msg, size_t start, long len,
		 const struct policy *pol, int maxtype, struct attr *tb)
{
	size_t off = start;

	for (int i = 0; i <= maxtype; i++)
		tb[i].off = 0;
	while (len >= NLA_HDRLEN) {
		uint16_t nla_len = get16(msg + off);
		uint16_t type = get16(msg + off + 2) & NLA_TYPE_MASK;
		struct attr a = { off, type, (uint16_t)(nla_len - NLA_HDRLEN) };
		int err;

		if (nla_len < NLA_HDRLEN || nla_len > len)
			break;
		if (type && type <= maxtype) {
			err = validate(msg, &a, &pol[type]);
			if (err)
				return err;
			tb[type] = a;
		}
		len -= NLA_ALIGN(nla_len);
		off += NLA_ALIGN(nla_len);
	}
	return 0;
}

static bool has(const struct attr *tb, int type)
{
	return tb[type].off != 0;
}

#define MAX_NESTED	64

/* The attributes of nest a, in order, as nla_for_each_nested() walks
 * them; their count. */
static int nested(const uint8_t *msg, const struct attr *a, struct attr *out)
{
	size_t off = a->off + NLA_HDRLEN;
	long rem = a->len;
	int n = 0;

	while (rem >= NLA_HDRLEN && n < MAX_NESTED) {
		uint16_t nla_len = get16(msg + off);

		if (nla_len < NLA_HDRLEN || nla_len > rem)
			break;
		out[n].off = off;
		out[n].type = get16(msg + off + 2) & NLA_TYPE_MASK;
		out[n++].len = (uint16_t)(nla_len - NLA_HDRLEN);
		rem -= NLA_ALIGN(nla_len);
		off += NLA_ALIGN(nla_len);
	}
	return n;
}

static enum dcm_outcome ieee_set(struct dcm_dev *d, const uint8_t *msg,
				 const struct attr *tb)
{
	struct attr ieee[DCB_ATTR_IEEE_MAX + 1], table[MAX_NESTED];
	enum dcm_outcome o = DCM_OK;
	int err, n;

	if (!has(tb, DCB_ATTR_IEEE))
		return DCM_NL_EINVAL;
	err = parse(msg, tb[DCB_ATTR_IEEE].off + NLA_HDRLEN,
		    tb[DCB_ATTR_IEEE].len, ieee_policy, DCB_ATTR_IEEE_MAX,
		    ieee);
	if (err)
		return dcm_nl_outcome(err);
	if (has(ieee, DCB_ATTR_IEEE_ETS)) {
		struct ieee_ets e;

		memcpy(&e, msg + ieee[DCB_ATTR_IEEE_ETS].off + NLA_HDRLEN,
		       sizeof(e));
		o = setets(d, &e);
		if (o != DCM_OK)
			return o;
	}
	if (has(ieee, DCB_ATTR_IEEE_PFC)) {
		struct ieee_pfc p;

		memcpy(&p, msg + ieee[DCB_ATTR_IEEE_PFC].off + NLA_HDRLEN,
		       sizeof(p));
		d->pfc_en = p.pfc_en;
		d->pfc_delay = p.delay;
	}
	if (!has(ieee, DCB_ATTR_IEEE_APP_TABLE))
		return DCM_OK;
	n = nested(msg, &ieee[DCB_ATTR_IEEE_APP_TABLE], table);
	for (int i = 0; i < n; i++) {
		const struct attr e = table[i];
		struct dcb_app a;

		if (e.type != DCB_ATTR_IEEE_APP)
			continue;
		if (e.len < sizeof(a))
			return DCM_IEEE_ERANGE;
		memcpy(&a, msg + e.off + NLA_HDRLEN, sizeof(a));
		o = setapp(d, &a);
		if (o != DCM_OK)
			return o;
	}
	return DCM_OK;
}

static enum dcm_outcome ieee_del(struct dcm_dev *d, const uint8_t *msg,
				 size_t msglen, const struct attr *tb,
				 enum dcm_outcome *alt)
{
	struct attr ieee[DCB_ATTR_IEEE_MAX + 1], table[MAX_NESTED];
	enum dcm_outcome o;
	int err, n;

	if (!has(tb, DCB_ATTR_IEEE))
		return DCM_NL_EINVAL;
	err = parse(msg, tb[DCB_ATTR_IEEE].off + NLA_HDRLEN,
		    tb[DCB_ATTR_IEEE].len, ieee_policy, DCB_ATTR_IEEE_MAX,
		    ieee);
	if (err)
		return dcm_nl_outcome(err);
	if (!has(ieee, DCB_ATTR_IEEE_APP_TABLE))
		return DCM_OK;
	n = nested(msg, &ieee[DCB_ATTR_IEEE_APP_TABLE], table);
	for (int i = 0; i < n; i++) {
		const struct attr e = table[i];
		struct dcb_app a;

		if (e.type != DCB_ATTR_IEEE_APP)
			continue;
		/* dcbnl_ieee_del() checks no length: it reads 4 bytes. */
		if (e.off + NLA_HDRLEN + sizeof(a) > msglen) {
			*alt = DCM_OK;
			return DCM_IEEE_ENOENT;
		}
		memcpy(&a, msg + e.off + NLA_HDRLEN, sizeof(a));
		o = delapp(d, &a);
		if (o != DCM_OK)
			return o;
	}
	return DCM_OK;
}

/* dcbnl_setapp(): the driver's .setapp refuses every entry. */
static enum dcm_outcome cee_setapp(const uint8_t *msg, const struct attr *tb)
{
	struct attr app[DCB_APP_ATTR_MAX + 1];
	uint8_t idtype;
	int err;

	if (!has(tb, DCB_ATTR_APP))
		return DCM_NL_EINVAL;
	err = parse(msg, tb[DCB_ATTR_APP].off + NLA_HDRLEN,
		    tb[DCB_ATTR_APP].len, app_policy, DCB_APP_ATTR_MAX, app);
	if (err)
		return dcm_nl_outcome(err);
	if (!has(app, DCB_APP_ATTR_IDTYPE) || !has(app, DCB_APP_ATTR_ID) ||
	    !has(app, DCB_APP_ATTR_PRIORITY))
		return DCM_NL_EINVAL;
	idtype = msg[app[DCB_APP_ATTR_IDTYPE].off + NLA_HDRLEN];
	if (idtype != DCB_APP_IDTYPE_ETHTYPE && idtype != DCB_APP_IDTYPE_PORTNUM)
		return DCM_NL_EINVAL;
	return DCM_NL_EOPNOTSUPP;
}

enum dcm_outcome dcm_eval(struct dcm_dev *d, const struct dcm_names *nm,
			  const uint8_t *msg, size_t len,
			  enum dcm_outcome *alt)
{
	const struct nlmsghdr *h = (const struct nlmsghdr *)msg;
	struct attr tb[DCB_ATTR_MAX + 1];
	const char *name;
	uint8_t cmd;
	int err;

	*alt = DCM_NOUTCOMES;
	if (len < NLMSG_HDRLEN || h->nlmsg_len != len)
		return DCM_OTHER;	/* dcbfuzz sends no such thing */
	if (len - NLMSG_HDRLEN < 1)
		return DCM_ACK_ONLY;
	if (h->nlmsg_type == RTM_GETDCB && (h->nlmsg_flags & NLM_F_DUMP))
		return DCM_NL_EOPNOTSUPP;
	if (len < NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct dcbmsg)))
		return DCM_NL_EINVAL;
	err = parse(msg, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct dcbmsg)),
		    (long)len - NLMSG_HDRLEN -
		    NLMSG_ALIGN(sizeof(struct dcbmsg)), top_policy,
		    DCB_ATTR_MAX, tb);
	if (err)
		return dcm_nl_outcome(err);
	cmd = ((const struct dcbmsg *)NLMSG_DATA(h))->cmd;
	if (cmd > DCB_CMD_MAX)
		return DCM_NL_EINVAL;
	if (cmd == DCB_CMD_UNDEFINED)
		return DCM_NL_EOPNOTSUPP;
	if (!has(tb, DCB_ATTR_IFNAME))
		return DCM_NL_EINVAL;
	name = (const char *)msg + tb[DCB_ATTR_IFNAME].off + NLA_HDRLEN;
	if (!strcmp(name, nm->nodcb))
		return DCM_NL_EOPNOTSUPP;
	if (strcmp(name, nm->dev))
		return DCM_NL_ENODEV;
	switch (cmd) {
	case DCB_CMD_IEEE_SET:
		return ieee_set(d, msg, tb);
	case DCB_CMD_IEEE_DEL:
		return ieee_del(d, msg, len, tb, alt);
	case DCB_CMD_IEEE_GET:
	case DCB_CMD_GDCBX:
		return DCM_OK;
	case DCB_CMD_SDCBX:
		if (!has(tb, DCB_ATTR_DCBX))
			return DCM_NL_EINVAL;
		return msg[tb[DCB_ATTR_DCBX].off + NLA_HDRLEN] ==
		       (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE) ?
		       DCM_OK : DCM_DCBX_REFUSED;
	case DCB_CMD_SAPP:
		return cee_setapp(msg, tb);
	case DCB_CMD_GSTATE:
		return DCM_NL_EOPNOTSUPP;	/* no .getstate */
	default:
		return DCM_OTHER;	/* dcbfuzz sends no other command */
	}
}

bool dcm_changes_state(const uint8_t *msg, size_t len)
{
	if (len < NLMSG_HDRLEN + sizeof(struct dcbmsg))
		return false;
	uint8_t cmd = ((const struct dcbmsg *)(msg + NLMSG_HDRLEN))->cmd;

	return cmd == DCB_CMD_IEEE_SET || cmd == DCB_CMD_IEEE_DEL;
}

bool dcm_carries_ets(const uint8_t *msg, size_t len)
{
	struct attr tb[DCB_ATTR_MAX + 1], ieee[DCB_ATTR_IEEE_MAX + 1];
	size_t start = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct dcbmsg));

	if (!dcm_changes_state(msg, len) || len < start ||
	    parse(msg, start, (long)(len - start), top_policy, DCB_ATTR_MAX,
		  tb) || !has(tb, DCB_ATTR_IEEE))
		return false;
	return !parse(msg, tb[DCB_ATTR_IEEE].off + NLA_HDRLEN,
		      tb[DCB_ATTR_IEEE].len, ieee_policy, DCB_ATTR_IEEE_MAX,
		      ieee) && has(ieee, DCB_ATTR_IEEE_ETS);
}

/* ---- building requests ---- */

static uint64_t below(struct cgm_rng *r, uint64_t n)
{
	return cgm_below(r, n);
}

static bool coin(struct cgm_rng *r, unsigned int one_in)
{
	return below(r, one_in) == 0;
}

static void msg_init(struct dcm_msg *m, uint16_t type, uint8_t cmd)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->buf;
	struct dcbmsg *d = (struct dcbmsg *)(m->buf + NLMSG_HDRLEN);

	memset(m, 0, sizeof(*m));
	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST;
	d->dcb_family = AF_UNSPEC;
	d->cmd = cmd;
	m->len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*d));
}

static void msg_end(struct dcm_msg *m)
{
	((struct nlmsghdr *)m->buf)->nlmsg_len = (uint32_t)m->len;
}

/*
 * An attribute whose header says nla_len (normally NLA_HDRLEN + len)
 * and len bytes of data, padded; the offset of its header.
 */
static size_t put_len(struct dcm_msg *m, uint16_t type, const void *data,
		      size_t len, uint16_t nla_len)
{
	size_t off = m->len;

	if (off + NLA_ALIGN(NLA_HDRLEN + len) > DCM_MSG_MAX - 64)
		return off;	/* never: requests stay well below */
	memcpy(m->buf + off, &nla_len, 2);
	memcpy(m->buf + off + 2, &type, 2);
	if (data)
		memcpy(m->buf + off + NLA_HDRLEN, data, len);
	m->len += NLA_ALIGN(NLA_HDRLEN + len);
	return off;
}

static size_t put(struct dcm_msg *m, uint16_t type, const void *data,
		  size_t len)
{
	return put_len(m, type, data, len, (uint16_t)(NLA_HDRLEN + len));
}

static size_t nest(struct dcm_msg *m, uint16_t type)
{
	return put(m, type, NULL, 0);
}

static void nest_end(struct dcm_msg *m, size_t off)
{
	uint16_t len = (uint16_t)(m->len - off);

	memcpy(m->buf + off, &len, 2);
}

static void put_name(struct dcm_msg *m, const char *name)
{
	put(m, DCB_ATTR_IFNAME, name, strlen(name) + 1);
}

static const uint16_t port_pool[] = { 0x8906, 4791, 3260, 80 };
static const uint16_t dscp_pool[] = { 0, 10, 46, 63 };

static struct dcb_app some_app(struct cgm_rng *r, bool odd)
{
	struct dcb_app a;

	a.selector = (uint8_t)(1 + below(r, 5));
	a.priority = (uint8_t)below(r, 8);
	a.protocol = a.selector == IEEE_8021QAZ_APP_SEL_DSCP ?
		     dscp_pool[below(r, 4)] : port_pool[below(r, 4)];
	if (!odd)
		return a;
	switch (below(r, 4)) {
	case 0:		/* every selector, 0 and 6..255 among them */
		a.selector = (uint8_t)below(r, 256);
		a.protocol = a.selector == IEEE_8021QAZ_APP_SEL_DSCP ?
			     dscp_pool[below(r, 4)] : port_pool[below(r, 4)];
		break;
	case 1:
		a.priority = (uint8_t)(8 + below(r, 248));
		break;
	case 2:		/* DSCP 64 and up */
		a.selector = IEEE_8021QAZ_APP_SEL_DSCP;
		a.protocol = (uint16_t)(64 + below(r, coin(r, 2) ? 8 : 65472));
		break;
	default:	/* a port as a DSCP: refused (the table stays
			 * within the pools: at most 160 entries) */
		if (a.selector == IEEE_8021QAZ_APP_SEL_DSCP)
			a.protocol = port_pool[below(r, 4)];
	}
	return a;
}

/* A map of n classes; with a priority in the last class. */
static void some_map(struct cgm_rng *r, unsigned int n, uint8_t *prio_tc)
{
	for (int p = 0; p < PRIOS; p++)
		prio_tc[p] = (uint8_t)below(r, n);
	prio_tc[below(r, PRIOS)] = (uint8_t)(n - 1);
}

/* TSA and bandwidths that pass: strict, or ETS classes summing 100. */
static void good_tsa(struct cgm_rng *r, uint8_t *tsa, uint8_t *bw)
{
	unsigned int left = 100, last = 0;
	bool any = false;

	for (int tc = 0; tc < PRIOS; tc++) {
		tsa[tc] = coin(r, 3) ? IEEE_8021QAZ_TSA_STRICT :
			  IEEE_8021QAZ_TSA_ETS;
		bw[tc] = 0;
		if (tsa[tc] == IEEE_8021QAZ_TSA_ETS) {
			bw[tc] = (uint8_t)below(r, left + 1);
			left -= bw[tc];
			last = (unsigned int)tc;
			any = true;
		} else if (coin(r, 4)) {	/* a strict class's share */
			bw[tc] = (uint8_t)below(r, 256);
		}
	}
	if (any)
		bw[last] = (uint8_t)(bw[last] + left);
}

static void good_ets(struct cgm_rng *r, struct ieee_ets *e)
{
	static const unsigned int classes[] = { 1, 1, 2, 2, 3, 4, 5, 8 };

	memset(e, 0, sizeof(*e));
	e->willing = (uint8_t)below(r, 2);
	e->ets_cap = (uint8_t)below(r, 256);	/* the device's: ignored */
	e->cbs = (uint8_t)below(r, 2);
	good_tsa(r, e->tc_tsa, e->tc_tx_bw);
	for (int tc = 0; tc < PRIOS; tc++)
		e->tc_rx_bw[tc] = (uint8_t)below(r, 101);
	some_map(r, classes[below(r, 8)], e->prio_tc);
	if (coin(r, 2)) {
		good_tsa(r, e->tc_reco_tsa, e->tc_reco_bw);
		some_map(r, 1 + (unsigned int)below(r, 8), e->reco_prio_tc);
	}
}

static void break_ets(struct cgm_rng *r, struct ieee_ets *e)
{
	int tc = (int)below(r, PRIOS), n = 1 + (int)below(r, 2);

	while (n--) {
		switch (below(r, 8)) {
		case 0:		/* TSA neither strict nor ETS */
			e->tc_tsa[tc] = (uint8_t)(coin(r, 2) ?
				IEEE_8021QAZ_TSA_CB_SHAPER :
				3 + below(r, 253));
			break;
		case 1:
			e->tc_reco_tsa[tc] = (uint8_t)(coin(r, 2) ?
				IEEE_8021QAZ_TSA_VENDOR : 3 + below(r, 253));
			break;
		case 2:		/* ETS shares off 100 */
			e->tc_tsa[tc] = IEEE_8021QAZ_TSA_ETS;
			e->tc_tx_bw[tc] = (uint8_t)(e->tc_tx_bw[tc] + 1 +
						    below(r, 200));
			break;
		case 3:
			e->tc_reco_tsa[tc] = IEEE_8021QAZ_TSA_ETS;
			e->tc_reco_bw[tc] = (uint8_t)(e->tc_reco_bw[tc] + 1 +
						      below(r, 200));
			break;
		case 4:		/* every class ETS with nothing, or 255s */
			memset(e->tc_tsa, IEEE_8021QAZ_TSA_ETS, PRIOS);
			memset(e->tc_tx_bw, coin(r, 2) ? 0 : 255, PRIOS);
			break;
		case 5:		/* a priority in TC 8 and up */
			e->prio_tc[below(r, PRIOS)] =
				(uint8_t)(8 + below(r, coin(r, 2) ? 8 : 248));
			break;
		case 6:
			e->reco_prio_tc[below(r, PRIOS)] =
				(uint8_t)(8 + below(r, 248));
			break;
		default:	/* the whole map past 8 */
			memset(e->prio_tc, 8 + (int)below(r, 248), PRIOS);
		}
	}
}

static void some_pfc(struct cgm_rng *r, struct ieee_pfc *p)
{
	memset(p, 0, sizeof(*p));
	p->pfc_cap = (uint8_t)below(r, 256);
	p->pfc_en = (uint8_t)below(r, 256);
	p->mbc = (uint8_t)below(r, 2);
	p->delay = (uint16_t)below(r, 65536);
	for (int i = 0; i < PRIOS; i++) {
		p->requests[i] = cgm_next(r) >> below(r, 64);
		p->indications[i] = cgm_next(r) >> below(r, 64);
	}
}

/* A struct attribute, sometimes with bytes past the struct (taken). */
static void put_struct(struct cgm_rng *r, struct dcm_msg *m, uint16_t type,
		       const void *s, size_t size)
{
	uint8_t buf[512];
	size_t extra = coin(r, 8) ? 1 + below(r, 40) : 0;

	memcpy(buf, s, size);
	for (size_t i = 0; i < extra; i++)
		buf[size + i] = (uint8_t)below(r, 256);
	put(m, type, buf, size + extra);
}

static void put_app(struct cgm_rng *r, struct dcm_msg *m,
		    const struct dcb_app *a, bool del)
{
	uint8_t buf[8];
	size_t len = sizeof(*a);

	memcpy(buf, a, sizeof(*a));
	if (coin(r, 12)) {
		/* Short: refused on set; read past its end on delete, where
		 * the bytes that follow are padding (0) or a next entry. */
		len = del ? 1 + below(r, 3) : below(r, 4);
	} else if (coin(r, 10)) {
		buf[4] = buf[5] = buf[6] = buf[7] = (uint8_t)below(r, 256);
		len += 1 + below(r, 4);
	}
	put(m, DCB_ATTR_IEEE_APP, buf, len);
}

static void put_app_table(struct cgm_rng *r, struct dcm_msg *m, bool del,
			  int n, bool odd)
{
	size_t table = nest(m, DCB_ATTR_IEEE_APP_TABLE);
	struct dcb_app prev = { 0 };

	for (int i = 0; i < n; i++) {
		struct dcb_app a = some_app(r, odd && coin(r, 3));

		if (i && coin(r, 4))	/* the same entry twice */
			a = prev;
		if (coin(r, 16))	/* not an APP entry: skipped */
			put(m, coin(r, 2) ? 0 : 2, &a, sizeof(a));
		put_app(r, m, &a, del);
		prev = a;
	}
	nest_end(m, table);
}

/* One request whose IEEE nest the caller fills. */
static size_t ieee_request(struct dcm_msg *m, struct cgm_rng *r,
			   const struct dcm_names *nm, uint8_t cmd)
{
	msg_init(m, coin(r, 16) ? RTM_GETDCB : RTM_SETDCB, cmd);
	put_name(m, nm->dev);
	return nest(m, DCB_ATTR_IEEE);
}

static void gen_ets(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m, bool bad)
{
	size_t ieee = ieee_request(m, r, nm, DCB_CMD_IEEE_SET);
	struct ieee_ets e;

	good_ets(r, &e);
	if (bad)
		break_ets(r, &e);
	put_struct(r, m, DCB_ATTR_IEEE_ETS, &e, sizeof(e));
	nest_end(m, ieee);
}

static void gen_mixed(struct cgm_rng *r, const struct dcm_names *nm,
		      struct dcm_msg *m)
{
	bool del = coin(r, 5);
	size_t ieee = ieee_request(m, r, nm, del ? DCB_CMD_IEEE_DEL :
				   DCB_CMD_IEEE_SET);
	struct ieee_ets e;
	struct ieee_pfc p;
	int order = (int)below(r, 3);

	good_ets(r, &e);
	if (coin(r, 3))
		break_ets(r, &e);
	some_pfc(r, &p);
	/* dcbnl takes ETS, PFC, APP in that order whatever the order here */
	for (int i = 0; i < 3; i++) {
		switch ((i + order) % 3) {
		case 0:
			if (coin(r, 6)) {	/* two ETS: the last counts */
				struct ieee_ets e2;

				good_ets(r, &e2);
				put(m, DCB_ATTR_IEEE_ETS, &e2, sizeof(e2));
			}
			put(m, DCB_ATTR_IEEE_ETS, &e, sizeof(e));
			break;
		case 1:
			if (!coin(r, 3))
				put(m, DCB_ATTR_IEEE_PFC, &p, sizeof(p));
			break;
		default:
			put_app_table(r, m, del, 1 + (int)below(r, 3), true);
		}
	}
	nest_end(m, ieee);
}

static void gen_dcbx(struct cgm_rng *r, const struct dcm_names *nm,
		     struct dcm_msg *m)
{
	uint8_t v[4] = { (uint8_t)(coin(r, 4) ? 0x09 : below(r, 256)),
			 (uint8_t)below(r, 256), (uint8_t)below(r, 256),
			 (uint8_t)below(r, 256) };

	if (coin(r, 5)) {
		msg_init(m, RTM_GETDCB, DCB_CMD_GDCBX);
		put_name(m, nm->dev);
		return;
	}
	msg_init(m, RTM_SETDCB, DCB_CMD_SDCBX);
	put_name(m, nm->dev);
	switch (below(r, 12)) {
	case 0:			/* none: EINVAL */
		break;
	case 1:			/* empty: ERANGE */
		put(m, DCB_ATTR_DCBX, v, 0);
		break;
	case 2:			/* longer than a u8: the first byte */
		put(m, DCB_ATTR_DCBX, v, 2 + below(r, 3));
		break;
	default:
		put(m, DCB_ATTR_DCBX, v, 1);
	}
}

static void gen_cee(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m)
{
	uint8_t idtype = (uint8_t)(coin(r, 3) ? below(r, 256) : below(r, 2));
	uint16_t id = (uint16_t)(coin(r, 2) ? 0x8906 : below(r, 65536));
	uint8_t prio = (uint8_t)below(r, 256);
	size_t app;

	switch (below(r, 8)) {
	case 0:
		msg_init(m, RTM_GETDCB, DCB_CMD_GSTATE);
		put_name(m, nm->dev);
		return;
	case 1:
		msg_init(m, RTM_SETDCB, DCB_CMD_UNDEFINED);
		put_name(m, nm->dev);
		return;
	default:
		break;
	}
	msg_init(m, RTM_SETDCB, DCB_CMD_SAPP);
	put_name(m, nm->dev);
	if (coin(r, 10))
		return;				/* no DCB_ATTR_APP */
	app = nest(m, DCB_ATTR_APP);
	if (!coin(r, 10))
		put(m, DCB_APP_ATTR_IDTYPE, &idtype, 1);
	if (!coin(r, 10))
		put(m, DCB_APP_ATTR_ID, &id, coin(r, 10) ? 1 : 2);
	if (!coin(r, 10))
		put(m, DCB_APP_ATTR_PRIORITY, &prio, coin(r, 16) ? 0 : 1);
	nest_end(m, app);
}

static void gen_get(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m)
{
	uint8_t junk[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	msg_init(m, coin(r, 4) ? RTM_SETDCB : RTM_GETDCB, DCB_CMD_IEEE_GET);
	if (coin(r, 3))		/* types past DCB_ATTR_MAX: ignored */
		put(m, (uint16_t)(DCB_ATTR_MAX + 1 + below(r, 100)), junk,
		    below(r, 9));
	put_name(m, nm->dev);
	if (coin(r, 4))		/* a set's attributes: ignored by a get */
		put(m, DCB_ATTR_IEEE, NULL, 0);
}

/* The other attribute-level breakages. */
static void gen_malformed(struct cgm_rng *r, const struct dcm_names *nm,
			  struct dcm_msg *m)
{
	uint8_t buf[512];
	size_t ieee, len;
	struct ieee_ets e;

	good_ets(r, &e);
	memset(buf, 0, sizeof(buf));
	switch (below(r, 16)) {
	case 0:			/* no IFNAME */
		msg_init(m, RTM_SETDCB, DCB_CMD_IEEE_SET);
		ieee = nest(m, DCB_ATTR_IEEE);
		put(m, DCB_ATTR_IEEE_ETS, &e, sizeof(e));
		nest_end(m, ieee);
		return;
	case 1:			/* a name without its NUL, or too long */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		len = coin(r, 2) ? strlen(nm->dev) : 16 + below(r, 8);
		memset(buf, 'x', len);
		memcpy(buf, nm->dev, strlen(nm->dev));
		put(m, DCB_ATTR_IFNAME, buf, coin(r, 8) ? 0 : len);
		return;
	case 2:			/* the name then NULs past 16 bytes */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		strcpy((char *)buf, nm->dev);
		put(m, DCB_ATTR_IFNAME, buf, 16 + below(r, 8));
		return;
	case 3:			/* the name, its NUL, then junk: taken */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		strcpy((char *)buf, nm->dev);
		len = strlen(nm->dev) + 1;
		memset(buf + len, 'j', 3);
		put(m, DCB_ATTR_IFNAME, buf, len + below(r, 4));
		return;
	case 4:			/* ETS or PFC shorter than their struct */
	case 5:
		ieee = ieee_request(m, r, nm, coin(r, 4) ? DCB_CMD_IEEE_DEL :
				    DCB_CMD_IEEE_SET);
		if (coin(r, 2))
			put(m, DCB_ATTR_IEEE_ETS, &e, below(r, sizeof(e)));
		else
			put(m, DCB_ATTR_IEEE_PFC, buf,
			    below(r, sizeof(struct ieee_pfc)));
		nest_end(m, ieee);
		return;
	case 6:			/* attributes the driver has no op for */
		ieee = ieee_request(m, r, nm, DCB_CMD_IEEE_SET);
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)below(r, 256);
		switch (below(r, 5)) {
		case 0:
			len = sizeof(struct ieee_maxrate);
			put(m, DCB_ATTR_IEEE_MAXRATE, buf,
			    coin(r, 2) ? len : below(r, len));
			break;
		case 1:
			len = sizeof(struct ieee_qcn);
			put(m, DCB_ATTR_IEEE_QCN, buf,
			    coin(r, 2) ? len : below(r, len));
			break;
		case 2:
			len = sizeof(struct dcbnl_buffer);
			put(m, DCB_ATTR_DCB_BUFFER, buf,
			    coin(r, 2) ? len : below(r, len));
			break;
		case 3:		/* peer attributes: no policy, no op */
			put(m, (uint16_t)(DCB_ATTR_IEEE_PEER_ETS + below(r, 3)),
			    buf, below(r, 64));
			break;
		default:
			len = sizeof(struct ieee_qcn_stats);
			put(m, DCB_ATTR_IEEE_QCN_STATS, buf,
			    coin(r, 2) ? len : below(r, len));
		}
		nest_end(m, ieee);
		return;
	case 7:			/* an IEEE nest of 1..3 bytes, or empty */
		msg_init(m, RTM_SETDCB, coin(r, 3) ? DCB_CMD_IEEE_DEL :
			 DCB_CMD_IEEE_SET);
		put_name(m, nm->dev);
		put(m, DCB_ATTR_IEEE, buf, below(r, 4));
		return;
	case 8:			/* no IEEE nest at all */
		msg_init(m, RTM_SETDCB, coin(r, 2) ? DCB_CMD_IEEE_DEL :
			 DCB_CMD_IEEE_SET);
		put_name(m, nm->dev);
		return;
	case 9:			/* a payload shorter than struct dcbmsg */
		msg_init(m, RTM_SETDCB, DCB_CMD_IEEE_GET);
		m->len = NLMSG_HDRLEN + below(r, sizeof(struct dcbmsg));
		return;
	case 10:		/* commands past DCB_CMD_MAX */
		msg_init(m, RTM_GETDCB,
			 (uint8_t)(DCB_CMD_MAX + 1 + below(r, 255 - DCB_CMD_MAX)));
		put_name(m, nm->dev);
		return;
	case 11:		/* a dump: dcbnl has none */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		((struct nlmsghdr *)m->buf)->nlmsg_flags |= NLM_F_DUMP;
		put_name(m, nm->dev);
		return;
	case 12:		/* a top-level u8 empty, a flag with data */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		put_name(m, nm->dev);
		if (coin(r, 2))
			put(m, coin(r, 2) ? DCB_ATTR_STATE : DCB_ATTR_SET_ALL,
			    buf, 0);
		else
			put(m, DCB_ATTR_PERM_HWADDR, buf, 1 + below(r, 6));
		return;
	case 13:		/* a top-level nest of 1..3 bytes */
		msg_init(m, RTM_GETDCB, DCB_CMD_IEEE_GET);
		put_name(m, nm->dev);
		put(m, coin(r, 2) ? DCB_ATTR_APP : DCB_ATTR_FEATCFG, buf,
		    1 + below(r, 3));
		return;
	case 14:		/* an inner length past the nest: the rest is
				 * ignored (with a warning) */
		ieee = ieee_request(m, r, nm, DCB_CMD_IEEE_SET);
		put_len(m, DCB_ATTR_IEEE_ETS, &e, sizeof(e),
			(uint16_t)(NLA_HDRLEN + sizeof(e) + 8 + below(r, 64)));
		nest_end(m, ieee);
		return;
	default:		/* garbage types at the top: ignored */
		msg_init(m, RTM_SETDCB, DCB_CMD_IEEE_SET);
		put(m, 0, buf, below(r, 8));
		put_name(m, nm->dev);
		put(m, (uint16_t)(DCB_ATTR_MAX + 1 + below(r, 200)), buf,
		    below(r, 16));
		ieee = nest(m, DCB_ATTR_IEEE | NLA_F_NESTED);
		nest_end(m, ieee);
	}
}

static void gen_device(struct cgm_rng *r, const struct dcm_names *nm,
		       struct dcm_msg *m)
{
	char name[IFNAMSIZ];

	switch (below(r, 4)) {
	case 0:
		snprintf(name, sizeof(name), "%s", nm->nodcb);
		break;
	case 1:
		name[0] = '\0';
		break;
	default:
		snprintf(name, sizeof(name), "%s%u", nm->unknown,
			 (unsigned int)below(r, 100000));
	}
	if (coin(r, 2)) {
		msg_init(m, RTM_GETDCB, coin(r, 2) ? DCB_CMD_IEEE_GET :
			 DCB_CMD_GDCBX);
		put_name(m, name);
	} else {
		struct ieee_ets e;
		size_t ieee;

		good_ets(r, &e);
		msg_init(m, RTM_SETDCB, DCB_CMD_IEEE_SET);
		put_name(m, name);
		ieee = nest(m, DCB_ATTR_IEEE);
		put(m, DCB_ATTR_IEEE_ETS, &e, sizeof(e));
		nest_end(m, ieee);
	}
}

static void gen_pfc(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m)
{
	size_t ieee = ieee_request(m, r, nm, DCB_CMD_IEEE_SET);
	struct ieee_pfc p;

	some_pfc(r, &p);
	put_struct(r, m, DCB_ATTR_IEEE_PFC, &p, sizeof(p));
	nest_end(m, ieee);
}

static void gen_app(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m, bool del)
{
	size_t ieee = ieee_request(m, r, nm, del ? DCB_CMD_IEEE_DEL :
				   DCB_CMD_IEEE_SET);

	put_app_table(r, m, del, 1 + (int)below(r, 3), coin(r, 3));
	nest_end(m, ieee);
}

typedef void gen_fn(struct cgm_rng *r, const struct dcm_names *nm,
		    struct dcm_msg *m);

/* The categories whose requests come in one kind. */
static gen_fn *const plain[DCM_NCATS] = {
	[DCM_PFC] = gen_pfc,		[DCM_MIXED] = gen_mixed,
	[DCM_DCBX] = gen_dcbx,		[DCM_CEE] = gen_cee,
	[DCM_GET] = gen_get,		[DCM_MALFORMED] = gen_malformed,
	[DCM_DEVICE] = gen_device,
};

void dcm_generate(struct cgm_rng *r, enum dcm_category c,
		  const struct dcm_names *nm, struct dcm_msg *m)
{
	if (c == DCM_ETS || c == DCM_ETS_BAD)
		gen_ets(r, nm, m, c == DCM_ETS_BAD);
	else if (c == DCM_APP_ADD || c == DCM_APP_DEL)
		gen_app(r, nm, m, c == DCM_APP_DEL);
	else if ((unsigned int)c < DCM_NCATS && plain[c])
		plain[c](r, nm, m);
	else
		gen_device(r, nm, m);
	msg_end(m);
}

/* ---- churn ---- */

static const char *const churn_names[DCM_CH_NKINDS] = {
	"ethtool", "tc_add", "tc_del" };
static const char *const churn_result_names[DCM_CR_NRESULTS] = {
	"ok", "EBUSY", "EINVAL", "EEXIST", "ENOENT", "other" };

const char *dcm_churn_name(enum dcm_churn_kind k)
{
	return churn_names[k];
}

const char *dcm_churn_result_name(enum dcm_churn_result r)
{
	return churn_result_names[r];
}

/* netif_setup_tc(): the layout trimmed to txq queues. */
static void setup_tc(struct dcm_dev *d, unsigned int txq)
{
	if (d->tc[0].offset + d->tc[0].count > txq) {
		d->num_tc = 0;
		return;
	}
	/* Priority 0 is not looked at (the loop starts at 1). */
	for (int p = 1; p < DCM_NTC; p++) {
		int tc = d->prio_tc[p];

		if (d->tc[tc].offset + d->tc[tc].count > txq)
			d->prio_tc[p] = 0;
	}
}

static void set_real_tx(struct dcm_dev *d, unsigned int txq)
{
	if (d->num_tc)
		setup_tc(d, txq);
	d->q = (uint8_t)txq;
}

/* virtnet_dcb_channels_set() */
static void channels_set(struct dcm_dev *d, unsigned int old,
			 unsigned int n)
{
	if (!holds_tc(d, old)) {
		d->tc_set = false;
		return;
	}
	apply_tc(d, d->ets.prio_tc, n);
}

static enum dcm_churn_result ethtool_l(struct dcm_dev *d, unsigned int n)
{
	unsigned int old = d->q;

	if (n == old)
		return DCM_CR_OK;	/* ethnl: nothing changes */
	if (n > d->maxq || !n)
		return DCM_CR_EINVAL;
	if (n < map_num_tc(d->ets.prio_tc) && holds_tc(d, old))
		return DCM_CR_EBUSY;
	if (n < old)
		channels_set(d, old, n);
	set_real_tx(d, n);
	if (n >= old)
		channels_set(d, old, n);
	return DCM_CR_OK;
}

/* mqprio_parse_opt() with hw 0 */
static bool mqprio_ok(const struct dcm_dev *d, const struct dcm_churn *op)
{
	for (int p = 0; p < DCM_NTC; p++)
		if (op->map[p] >= op->num_tc)
			return false;
	for (int i = 0; i < op->num_tc; i++) {
		unsigned int last = op->offset[i] + op->count[i];

		if (op->offset[i] >= d->q || !op->count[i] || last > d->q)
			return false;
		for (int j = i + 1; j < op->num_tc; j++)
			if (last > op->offset[j])
				return false;
	}
	return op->num_tc <= DCM_NTC;
}

enum dcm_churn_result dcm_churn_apply(struct dcm_dev *d,
				      const struct dcm_churn *op)
{
	switch (op->kind) {
	case DCM_CH_ETHTOOL:
		return ethtool_l(d, op->n);
	case DCM_CH_TC_ADD:
		if (d->mqprio)
			return DCM_CR_EEXIST;
		if (d->maxq < 2)
			return DCM_CR_OTHER;	/* EOPNOTSUPP: not multiqueue */
		if (!mqprio_ok(d, op)) {
			/* qdisc_create() calls ->destroy() after a failed
			 * ->init(): mqprio_destroy() sets num_tc 0. */
			d->num_tc = 0;
			return DCM_CR_EINVAL;
		}
		d->num_tc = op->num_tc;
		for (int i = 0; i < op->num_tc; i++) {
			d->tc[i].count = op->count[i];
			d->tc[i].offset = op->offset[i];
		}
		memcpy(d->prio_tc, op->map, DCM_NTC);
		d->mqprio = true;
		return DCM_CR_OK;
	default:
		if (!d->mqprio)
			return DCM_CR_ENOENT;	/* the default qdisc: handle 0 */
		d->num_tc = 0;
		d->mqprio = false;
		return DCM_CR_OK;
	}
}

void dcm_churn_generate(struct cgm_rng *r, enum dcm_churn_kind k, uint8_t q,
			struct dcm_churn *op)
{
	unsigned int n, left, off = 0;

	memset(op, 0, sizeof(*op));
	op->kind = k;
	if (k == DCM_CH_ETHTOOL) {
		op->n = (uint8_t)(1 + below(r, 8));
		return;
	}
	if (k != DCM_CH_TC_ADD || !q)
		return;
	n = 1 + (unsigned int)below(r, q < 8 ? q : 8);
	op->num_tc = (uint8_t)n;
	for (int p = 0; p < DCM_NTC; p++)
		op->map[p] = (uint8_t)below(r, n);
	/* contiguous groups of at least one queue, maybe not all queues */
	left = q;
	for (unsigned int i = 0; i < n; i++) {
		unsigned int most = left - (n - 1 - i);

		op->offset[i] = (uint16_t)off;
		op->count[i] = (uint16_t)(i == n - 1 && coin(r, 2) ? most :
					  1 + below(r, most));
		off += op->count[i];
		left -= op->count[i];
	}
	if (coin(r, 8))		/* past the queues in use: refused */
		op->count[n - 1] = (uint16_t)(op->count[n - 1] + left + 1);
}

int dcm_churn_argv(const struct dcm_churn *op, const char *dev,
		   char *buf, size_t size, char **argv, int max)
{
	size_t used = 0;
	int n = 0;

#define ARG(...) do {							\
		int w_ = snprintf(buf + used, size - used, __VA_ARGS__);	\
		if (w_ < 0 || (size_t)w_ >= size - used || n + 1 >= max)	\
			return -1;						\
		argv[n++] = buf + used;						\
		used += (size_t)w_ + 1;						\
	} while (0)

	switch (op->kind) {
	case DCM_CH_ETHTOOL:
		ARG("-L");
		ARG("%s", dev);
		ARG("combined");
		ARG("%u", op->n);
		break;
	case DCM_CH_TC_ADD:
		ARG("qdisc");
		ARG("add");
		ARG("dev");
		ARG("%s", dev);
		ARG("root");
		ARG("handle");
		ARG("77:");
		ARG("mqprio");
		ARG("num_tc");
		ARG("%u", op->num_tc);
		ARG("map");
		for (int p = 0; p < DCM_NTC; p++)
			ARG("%u", op->map[p]);
		ARG("queues");
		for (int i = 0; i < op->num_tc; i++)
			ARG("%u@%u", op->count[i], op->offset[i]);
		ARG("hw");
		ARG("0");
		break;
	default:
		ARG("qdisc");
		ARG("del");
		ARG("dev");
		ARG("%s", dev);
		ARG("root");
	}
#undef ARG
	argv[n] = NULL;
	return n;
}

/* ---- observations ---- */

/* netdev_txq_to_tc() */
static int txq_to_tc(const struct dcm_dev *d, unsigned int txq)
{
	if (!d->num_tc)
		return 0;
	for (int i = 0; i < DCM_NTC; i++)
		if ((unsigned int)(txq - d->tc[i].offset) < d->tc[i].count)
			return i;
	return -1;
}

void dcm_expect(const struct dcm_dev *d, bool sysfs, struct dcm_obs *o)
{
	memset(o, 0, sizeof(*o));
	o->ets = d->ets;
	o->ets.ets_cap = d->q < PRIOS ? d->q : PRIOS;
	for (int p = 0; p < PRIOS; p++)
		o->ets.prio_tc[p] = d->num_tc ? d->prio_tc[p] : 0;
	/* any priority can be paused (TX NAPI, the default); no PFC frame
	 * is sent or received in a fuzz run: the counters stay 0
	 */
	o->pfc.pfc_cap = PRIOS;
	o->pfc.pfc_en = d->pfc_en;
	o->pfc.delay = d->pfc_delay;
	o->napp = d->napp;
	memcpy(o->app, d->app, d->napp * sizeof(d->app[0]));
	o->have_sysfs = sysfs;
	if (!sysfs)
		return;
	o->q = d->q;
	for (unsigned int i = 0; i < d->q && i < DCM_NTC; i++)
		o->traffic_class[i] = txq_to_tc(d, i);
}

static void list8(char *out, size_t size, const uint8_t *v)
{
	snprintf(out, size, "%u%u%u%u%u%u%u%u", v[0], v[1], v[2], v[3], v[4],
		 v[5], v[6], v[7]);
}

bool dcm_obs_matches(const struct dcm_dev *d, const struct dcm_obs *o,
		     char *why, size_t size)
{
	struct dcm_obs e;
	char a[32], b[32];

	dcm_expect(d, o->have_sysfs, &e);
	if (memcmp(e.ets.prio_tc, o->ets.prio_tc, PRIOS)) {
		list8(a, sizeof(a), o->ets.prio_tc);
		list8(b, sizeof(b), e.ets.prio_tc);
		snprintf(why, size, "ETS prio_tc %s, expected %s", a, b);
		return false;
	}
	if (e.ets.ets_cap != o->ets.ets_cap) {
		snprintf(why, size, "ets_cap %u, expected %u", o->ets.ets_cap,
			 e.ets.ets_cap);
		return false;
	}
	if (memcmp(&e.ets, &o->ets, sizeof(e.ets))) {
		snprintf(why, size, "ETS (tsa, bw, reco, willing, cbs) differs "
			 "from the last accepted set");
		return false;
	}
	/* the configuration, not the pause counters: those are the
	 * device's (pause frames other tests sent stay in them)
	 */
	if (e.pfc.pfc_cap != o->pfc.pfc_cap || e.pfc.pfc_en != o->pfc.pfc_en ||
	    e.pfc.mbc != o->pfc.mbc || e.pfc.delay != o->pfc.delay) {
		snprintf(why, size, "PFC cap %u en 0x%02x delay %u mbc %u, "
			 "expected cap %u en 0x%02x delay %u mbc 0",
			 o->pfc.pfc_cap, o->pfc.pfc_en, o->pfc.delay,
			 o->pfc.mbc, e.pfc.pfc_cap, e.pfc.pfc_en, e.pfc.delay);
		return false;
	}
	if (e.napp != o->napp ||
	    memcmp(e.app, o->app, e.napp * sizeof(e.app[0]))) {
		snprintf(why, size, "APP table of %u entries, expected %u (or "
			 "in another order)", o->napp, e.napp);
		return false;
	}
	if (!o->have_sysfs)
		return true;
	if (e.q != o->q) {
		snprintf(why, size, "%u TX queues in use, expected %u", o->q,
			 e.q);
		return false;
	}
	for (unsigned int i = 0; i < e.q && i < DCM_NTC; i++)
		if (e.traffic_class[i] != o->traffic_class[i]) {
			snprintf(why, size, "tx-%u traffic_class %d, expected "
				 "%d (-1: EINVAL)", i, o->traffic_class[i],
				 e.traffic_class[i]);
			return false;
		}
	return true;
}

/* ---- the possible states ---- */

static void add_branch(struct dcm_branch *out, int *n,
		       const struct dcm_branch *b)
{
	for (int i = 0; i < *n; i++)
		if (!memcmp(&out[i], b, sizeof(*b)))
			return;
	if (*n < DCM_BRANCHES)
		out[(*n)++] = *b;
}

static void set_branches(struct dcm_world *w, const struct dcm_branch *b,
			 int n)
{
	memcpy(w->b, b, (size_t)n * sizeof(*b));
	w->n = n;
	if (n > w->max_n)
		w->max_n = n;
}

void dcm_world_init(struct dcm_world *w, const struct dcm_dev *d)
{
	memset(w, 0, sizeof(*w));
	w->b[0].dev = *d;
	w->n = w->max_n = 1;
}

void dcm_world_churn_begin(struct dcm_world *w, const struct dcm_churn *op)
{
	w->churn_pending = true;
	w->op = *op;
	for (int i = 0; i < w->n; i++) {
		w->b[i].churn_done = false;
		w->b[i].churn_pred = DCM_CR_OK;
	}
}

unsigned int dcm_world_churn_end(struct dcm_world *w,
				 enum dcm_churn_result got)
{
	static struct dcm_branch keep[DCM_BRANCHES], all[DCM_BRANCHES];
	unsigned int allowed = 0;
	int nk = 0, na = 0;

	for (int i = 0; i < w->n; i++) {
		struct dcm_branch b = w->b[i];

		if (!b.churn_done)
			b.churn_pred = dcm_churn_apply(&b.dev, &w->op);
		b.churn_done = false;
		allowed |= 1u << b.churn_pred;
		add_branch(all, &na, &b);
		if (b.churn_pred == got) {
			b.churn_pred = DCM_CR_OK;
			add_branch(keep, &nk, &b);
		}
	}
	w->churn_pending = false;
	if (nk)
		set_branches(w, keep, nk);
	else
		set_branches(w, all, na);
	for (int i = 0; i < w->n; i++)
		w->b[i].churn_pred = DCM_CR_OK;
	return nk ? allowed : 0;
}

unsigned int dcm_world_request(struct dcm_world *w,
			       const struct dcm_names *nm,
			       const uint8_t *msg, size_t len,
			       enum dcm_outcome got)
{
	static struct dcm_branch keep[DCM_BRANCHES], all[DCM_BRANCHES];
	unsigned int allowed = 0;
	int nk = 0, na = 0;

	for (int i = 0; i < w->n; i++) {
		/* before the pending churn (or none), and after it */
		for (int after = 0; after < 2; after++) {
			struct dcm_branch b = w->b[i];
			enum dcm_outcome o, alt;

			if (after) {
				if (!w->churn_pending || b.churn_done)
					break;
				b.churn_pred = dcm_churn_apply(&b.dev, &w->op);
				b.churn_done = true;
			}
			o = dcm_eval(&b.dev, nm, msg, len, &alt);
			allowed |= DCM_BIT(o);
			if (alt != DCM_NOUTCOMES)
				allowed |= DCM_BIT(alt);
			add_branch(all, &na, &b);
			if (o == got || alt == got)
				add_branch(keep, &nk, &b);
		}
	}
	allowed &= ~DCM_BIT(DCM_OTHER);
	set_branches(w, nk ? keep : all, nk ? nk : na);
	return allowed;
}

bool dcm_world_observe(struct dcm_world *w, const struct dcm_obs *o,
		       char *why, size_t size)
{
	static struct dcm_branch keep[DCM_BRANCHES];
	int nk = 0;

	for (int i = 0; i < w->n; i++) {
		/* a pending churn may have taken effect: both, as requests */
		for (int after = 0; after < 2; after++) {
			struct dcm_branch b = w->b[i];
			char tmp[160];

			if (after) {
				if (!w->churn_pending || b.churn_done)
					break;
				b.churn_pred = dcm_churn_apply(&b.dev, &w->op);
				b.churn_done = true;
			}
			if (dcm_obs_matches(&b.dev, o, tmp, sizeof(tmp)))
				add_branch(keep, &nk, &b);
			else if (i == 0 && !after)
				snprintf(why, size, "%s", tmp);
		}
	}
	if (!nk)
		return false;
	set_branches(w, keep, nk);
	return true;
}

uint8_t dcm_world_queues(const struct dcm_world *w)
{
	return w->b[0].dev.q;
}

void dcm_hex(const uint8_t *buf, size_t len, size_t n, char *out,
	     size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len && i < n && o + 3 < size; i++)
		o += (size_t)snprintf(out + o, size - o, "%02x", buf[i]);
	if (size)
		out[o < size ? o : size - 1] = '\0';
	if (len > n && o + 4 < size)
		snprintf(out + o, size - o, "...");
}
