// SPDX-License-Identifier: GPL-2.0
/*
 * pfcd - a switch's DCB agent: sends 802.1Qbb XOFF and XON from the
 * backlog of its ports' ETS bands (see pfc.h for the decision), and
 * programs each port's ets qdisc from the port's DCB state (swets.h).
 *
 * Every --interval it reads, in one RTM_GETQDISC dump, each port's ETS
 * priority -> band map (the ets qdisc's priomap) and the byte backlog of
 * the bfifo under each lossless band; every --config-every it reads each
 * port's PFC enable bits and pause counters (dcbnl IEEE GET), so that a
 * change made with dcb, lldptool or by DCBX is followed.  With that read,
 * a port's ETS configuration becomes its ets qdisc (bands, strict bands,
 * quanta, priomap: changed in place when it differs), and each band that
 * holds a PFC priority gets a bfifo of the port's LIMIT bytes (one that
 * no longer does loses it), as a switch programs its scheduler from its
 * DCB state; a port without PFC anywhere costs one dump per
 * --config-every.  The
 * frames leave past the qdiscs (PACKET_QDISC_BYPASS), as a switch's MAC
 * control frames do; the driver counts them in the port's "requests".
 *
 * What happens is logged one line per event on stdout; --state FILE gets
 * a JSON object of every port's counters, replaced four times a second
 * and at the end.  SIGTERM or SIGINT: XON for every pause in effect, the
 * state written, exit 0.  SIGUSR1: the figures (peak backlog, reaction,
 * episodes, the loop's longest gap) start again, for a new measurement.
 */
#include "pfc.h"
#include "rtnl.h"
#include "swets.h"
#include "util.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/gen_stats.h>
#include <linux/if_packet.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct opts {
	struct cli cli;
	double interval, idle_interval, refresh, watchdog, restore,
	       config_every;
	uint64_t quanta;
	const char *state;
};

static struct opts o = {
	.interval = 0.001, .idle_interval = 0.010, .refresh = 0.010,
	.watchdog = 0.200,
	.restore = 0.200, .config_every = 0.100, .quanta = 65535,
};

struct port_io {
	int ifindex;
	uint8_t mac[6];
	uint32_t ets_handle;	/* major of the port's ets qdisc, 0: none */
	uint8_t band_of[PFC_PRIOS];
	unsigned int bands;
	uint8_t pfc_en;
	uint64_t indications[PFC_PRIOS], requests[PFC_PRIOS];
	struct ieee_pfc pfc;		/* as dcbnl last said */
	struct ieee_ets ets;
	bool dcb_ok, ets_ok;
	/* the ets qdisc as dumped, its parent; a plan the kernel refused
	 * and the qdisc it was refused for (not tried again until the DCB
	 * state asks for another, or the qdisc is another)
	 */
	struct swets have, refused, refused_have;
	uint32_t ets_parent;
	bool refused_set;
	uint64_t limit;			/* of a lossless band's bfifo */
	uint64_t ets_changes, fifo_changes, ets_errors;
	/* the bfifo under each band: handle, parent, limit; the limit to
	 * give back when a storm is over
	 */
	uint32_t fifo_handle[PFC_MAX_BANDS], fifo_parent[PFC_MAX_BANDS];
	uint32_t fifo_limit[PFC_MAX_BANDS], saved_limit[PFC_MAX_BANDS];
};

static struct pfc_engine engine;
static struct port_io io[PFC_MAX_PORTS];
static struct rtnl nl;
static int pfd = -1;
static uint64_t send_errors;
/* how the loop kept time: steps, and the longest gap between two */
static uint64_t steps;
static double max_gap;
static volatile sig_atomic_t stop_signal, reset_signal;

static void usage(void)
{
	printf(
"usage: pfcd [OPTIONS] PORT:XOFF:XON[:LIMIT] ...\n"
"A switch's DCB agent: when the ETS band that holds a priority on a PORT\n"
"has XOFF bytes queued or more, every other port with PFC enabled on that\n"
"priority sends its partner XOFF for it, again every --refresh, and XON\n"
"once the band has XON bytes or fewer.  Each PORT's ets qdisc follows\n"
"the port's DCB ETS configuration; with LIMIT, a band holding a PFC\n"
"priority gets a bfifo of LIMIT bytes.\n"
"  --interval S        backlog read every S seconds while a band is at\n"
"                      half its XON threshold or a pause is on (default\n"
"                      0.001), else every --idle-interval (default 0.01)\n"
"  --config-every S    DCB state (ETS, PFC enables, pause counters) read\n"
"                      and the ets qdiscs made to follow it every S\n"
"                      (default 0.1)\n"
"  --quanta N          pause time of an XOFF, 1..65535 (default 65535:\n"
"                      33.6 ms at the 1 Gbit/s virtio_net assumes)\n"
"  --refresh S         XOFF sent again while a pause lasts (default 0.01)\n"
"  --watchdog S        a band that sent nothing for S with backlog while\n"
"                      its port received pauses is stormed: no longer\n"
"                      paused for (default 0.2; 0: no watchdog)\n"
"  --restore S         a stormed band is paused for again when its port\n"
"                      received no pause for S (default 0.2)\n"
"  --state FILE        JSON counters, replaced 4 times a second\n"
"  -j, --json          print the final state as one JSON object\n"
"  -h, --help          this text\n");
}

static const struct option longopts[] = {
	OPTION_ARG("interval", 'i'), OPTION_ARG("idle-interval", 'I'),
	OPTION_ARG("config-every", 'C'),
	OPTION_ARG("quanta", 'q'), OPTION_ARG("refresh", 'r'),
	OPTION_ARG("watchdog", 'w'), OPTION_ARG("restore", 'R'),
	OPTION_ARG("state", 's'),
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *p = ctx;

	switch (c) {
	case 'i':
		return parse_seconds("--interval", arg, 1, &p->interval);
	case 'I':
		return parse_seconds("--idle-interval", arg, 1,
				     &p->idle_interval);
	case 'C':
		return parse_seconds("--config-every", arg, 10,
				     &p->config_every);
	case 'q':
		return parse_u64("--quanta", arg, 1, 65535, &p->quanta);
	case 'r':
		return parse_seconds("--refresh", arg, 10, &p->refresh);
	case 'w':
		return parse_seconds("--watchdog", arg, 60, &p->watchdog);
	case 'R':
		return parse_seconds("--restore", arg, 60, &p->restore);
	case 's':
		p->state = arg;
		return 0;
	}
	return 0;
}

/* ---- reading the ports ---------------------------------------------- */

static int port_of_ifindex(int ifindex)
{
	for (unsigned int i = 0; i < engine.nports; i++)
		if (io[i].ifindex == ifindex)
			return (int)i;
	return -1;
}

/* One qdisc's counters, before the dump tells which band it is on. */
struct child {
	int port;
	uint32_t parent, handle, limit;
	bool fifo;
	uint64_t bytes, backlog, drops;
};

struct dump {
	struct pfc_sample *s;
	struct child child[PFC_MAX_PORTS * PFC_MAX_BANDS];
	unsigned int nchild;
};

/* The ets qdisc's handle, bands and priomap */
static void ets_options(int i, const struct tcmsg *t, const struct nlattr *opt)
{
	const struct nlattr *ob[TCA_ETS_MAX + 1];
	struct swets *h = &io[i].have;
	const char *p, *end;
	unsigned int band;
	int prio = 0;

	rtnl_attrs(RTNL_DATA(opt), RTNL_LEN(opt), ob, TCA_ETS_MAX);
	if (!ob[TCA_ETS_NBANDS] || !ob[TCA_ETS_PRIOMAP])
		return;
	io[i].ets_handle = TC_H_MAJ(t->tcm_handle);
	io[i].ets_parent = t->tcm_parent;
	io[i].bands = *(const uint8_t *)RTNL_DATA(ob[TCA_ETS_NBANDS]);
	memset(h, 0, sizeof(*h));
	h->bands = (uint8_t)io[i].bands;
	if (ob[TCA_ETS_NSTRICT])
		h->strict = *(const uint8_t *)RTNL_DATA(ob[TCA_ETS_NSTRICT]);
	p = RTNL_DATA(ob[TCA_ETS_PRIOMAP]);
	end = p + RTNL_LEN(ob[TCA_ETS_PRIOMAP]);
	/* one TCA_ETS_PRIOMAP_BAND per priority, in priority order */
	while (p + NLA_HDRLEN < end && prio < SWETS_PRIOMAP) {
		const struct nlattr *a = (const void *)p;

		if (a->nla_len < NLA_HDRLEN + 1 || p + a->nla_len > end)
			break;
		h->priomap[prio] = *(const uint8_t *)RTNL_DATA(a);
		if (prio < PFC_PRIOS)
			io[i].band_of[prio] = h->priomap[prio];
		prio++;
		p += NLA_ALIGN(a->nla_len);
	}
	if (!ob[TCA_ETS_QUANTA])
		return;
	/* one TCA_ETS_QUANTA_BAND per band after the strict ones */
	p = RTNL_DATA(ob[TCA_ETS_QUANTA]);
	end = p + RTNL_LEN(ob[TCA_ETS_QUANTA]);
	for (band = h->strict; p + NLA_HDRLEN < end && band < SWETS_TCS;
	     band++) {
		const struct nlattr *a = (const void *)p;

		if (a->nla_len < NLA_HDRLEN + 4 || p + a->nla_len > end)
			break;
		memcpy(&h->quanta[band], RTNL_DATA(a), 4);
		p += NLA_ALIGN(a->nla_len);
	}
}

/*
 * RTM_GETQDISC, all of them in one dump (a dump per port's classes cost
 * ~1 ms of the switch's CPU under TCG): each port's ets qdisc (handle,
 * priomap), and the counters of the qdiscs under its bands.  A band the
 * lab makes lossless has a bfifo of its own (dcblab.lab.switch); a band
 * with the ets qdisc's default child is not dumped, and reads as empty.
 */
static int on_qdisc(const struct nlmsghdr *h, void *ctx)
{
	struct dump *d = ctx;
	const struct tcmsg *t = NLMSG_DATA(h);
	const struct nlattr *tb[TCA_MAX + 1], *sb[TCA_STATS_MAX + 1];
	int i = port_of_ifindex(t->tcm_ifindex);
	struct child *c;

	if (i < 0 || h->nlmsg_len < NLMSG_LENGTH(sizeof(*t)))
		return 0;
	rtnl_attrs((const char *)t + NLMSG_ALIGN(sizeof(*t)),
		   h->nlmsg_len - NLMSG_LENGTH(sizeof(*t)), tb, TCA_MAX);
	if (!tb[TCA_KIND])
		return 0;
	if (!strcmp(RTNL_DATA(tb[TCA_KIND]), "ets")) {
		if (tb[TCA_OPTIONS])
			ets_options(i, t, tb[TCA_OPTIONS]);
		return 0;
	}
	if (!tb[TCA_STATS2] || d->nchild >= sizeof(d->child) /
					     sizeof(d->child[0]))
		return 0;
	c = &d->child[d->nchild++];
	memset(c, 0, sizeof(*c));
	c->port = i;
	c->parent = t->tcm_parent;
	c->handle = t->tcm_handle;
	if (!strcmp(RTNL_DATA(tb[TCA_KIND]), "bfifo") && tb[TCA_OPTIONS] &&
	    RTNL_LEN(tb[TCA_OPTIONS]) >= sizeof(struct tc_fifo_qopt)) {
		struct tc_fifo_qopt q;

		memcpy(&q, RTNL_DATA(tb[TCA_OPTIONS]), sizeof(q));
		c->fifo = true;
		c->limit = q.limit;
	}
	rtnl_attrs(RTNL_DATA(tb[TCA_STATS2]), RTNL_LEN(tb[TCA_STATS2]), sb,
		   TCA_STATS_MAX);
	if (sb[TCA_STATS_BASIC] && RTNL_LEN(sb[TCA_STATS_BASIC]) >= 8)
		memcpy(&c->bytes, RTNL_DATA(sb[TCA_STATS_BASIC]), 8);
	if (sb[TCA_STATS_QUEUE] &&
	    RTNL_LEN(sb[TCA_STATS_QUEUE]) >= sizeof(struct gnet_stats_queue)) {
		struct gnet_stats_queue q;

		memcpy(&q, RTNL_DATA(sb[TCA_STATS_QUEUE]), sizeof(q));
		c->backlog = q.backlog;
		c->drops = q.drops;
	}
	return 0;
}

/* dcbnl IEEE GET: the PFC enable bits and counters */
static int on_dcb(const struct nlmsghdr *h, void *ctx)
{
	struct port_io *p = ctx;
	const struct nlattr *tb[DCB_ATTR_MAX + 1];
	const struct nlattr *ib[DCB_ATTR_IEEE_MAX + 1];
	struct ieee_pfc pfc;
	size_t hl = NLMSG_ALIGN(sizeof(struct dcbmsg));

	if (h->nlmsg_len < NLMSG_LENGTH(hl))
		return 0;
	rtnl_attrs((const char *)NLMSG_DATA(h) + hl,
		   h->nlmsg_len - NLMSG_LENGTH(hl), tb, DCB_ATTR_MAX);
	if (!tb[DCB_ATTR_IEEE])
		return 0;
	rtnl_attrs(RTNL_DATA(tb[DCB_ATTR_IEEE]), RTNL_LEN(tb[DCB_ATTR_IEEE]),
		   ib, DCB_ATTR_IEEE_MAX);
	if (ib[DCB_ATTR_IEEE_ETS] &&
	    RTNL_LEN(ib[DCB_ATTR_IEEE_ETS]) >= sizeof(p->ets)) {
		memcpy(&p->ets, RTNL_DATA(ib[DCB_ATTR_IEEE_ETS]),
		       sizeof(p->ets));
		p->ets_ok = true;
	}
	if (!ib[DCB_ATTR_IEEE_PFC] ||
	    RTNL_LEN(ib[DCB_ATTR_IEEE_PFC]) < sizeof(pfc))
		return 0;
	memcpy(&pfc, RTNL_DATA(ib[DCB_ATTR_IEEE_PFC]), sizeof(pfc));
	p->pfc = pfc;
	p->pfc_en = pfc.pfc_en;
	memcpy(p->indications, pfc.indications, sizeof(p->indications));
	memcpy(p->requests, pfc.requests, sizeof(p->requests));
	p->dcb_ok = true;
	return 0;
}

/* dcbnl, every --config-every: PFC enables and pause counters */
static void read_dcb(void)
{
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = DCB_CMD_IEEE_GET };
	struct rtnl_msg m;

	for (unsigned int i = 0; i < engine.nports; i++) {
		rtnl_msg_init(&m, RTM_GETDCB, 0, &d, sizeof(d));
		rtnl_msg_put_str(&m, DCB_ATTR_IFNAME, engine.port[i].name);
		io[i].dcb_ok = false;
		io[i].ets_ok = false;
		rtnl_request(&nl, &m, on_dcb, &io[i]);
	}
}

/* Every port's sample, from one qdisc dump and the last dcbnl read */
static void read_samples(struct pfc_sample *s)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC };
	static struct dump d;
	struct rtnl_msg m;
	unsigned int i, c;

	for (i = 0; i < engine.nports; i++) {
		io[i].ets_handle = 0;
		memset(io[i].band_of, PFC_NO_BAND, sizeof(io[i].band_of));
		memset(io[i].fifo_handle, 0, sizeof(io[i].fifo_handle));
		memset(&s[i], 0, sizeof(s[i]));
	}
	d.s = s;
	d.nchild = 0;
	rtnl_msg_init(&m, RTM_GETQDISC, NLM_F_DUMP, &t, sizeof(t));
	if (rtnl_request(&nl, &m, on_qdisc, &d))
		return;
	for (c = 0; c < d.nchild; c++) {
		struct child *ch = &d.child[c];
		unsigned int band = TC_H_MIN(ch->parent) - 1;

		if (!io[ch->port].ets_handle ||
		    TC_H_MAJ(ch->parent) != io[ch->port].ets_handle ||
		    band >= PFC_MAX_BANDS)
			continue;
		if (ch->fifo) {
			io[ch->port].fifo_handle[band] = ch->handle;
			io[ch->port].fifo_parent[band] = ch->parent;
			io[ch->port].fifo_limit[band] = ch->limit;
		}
		s[ch->port].backlog[band] = ch->backlog;
		s[ch->port].sent[band] = ch->bytes;
		s[ch->port].drops[band] = ch->drops;
	}
	for (i = 0; i < engine.nports; i++) {
		s[i].valid = io[i].ets_handle && io[i].dcb_ok;
		s[i].pfc_en = io[i].pfc_en;
		s[i].bands = io[i].bands;
		memcpy(s[i].band_of, io[i].band_of, sizeof(s[i].band_of));
		memcpy(s[i].indications, io[i].indications,
		       sizeof(s[i].indications));
	}
}

/* ---- acting ------------------------------------------------------------ */

static void send_pfc(void *ctx, unsigned int port, uint16_t vector,
		     const uint16_t quanta[PFC_PRIOS])
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(PFC_ETHERTYPE),
				   .sll_ifindex = io[port].ifindex,
				   .sll_halen = 6 };
	struct pfc_frame f = { .ethertype = PFC_ETHERTYPE,
			       .opcode = PFC_OPCODE, .vector = vector };
	uint8_t buf[PFC_FRAME_MIN];

	(void)ctx;
	memcpy(f.dst, pfc_addr, 6);
	memcpy(f.src, io[port].mac, 6);
	memcpy(f.quanta, quanta, sizeof(f.quanta));
	memcpy(sll.sll_addr, pfc_addr, 6);
	pfc_build(buf, sizeof(buf), &f);
	if (sendto(pfd, buf, sizeof(buf), 0, (void *)&sll, sizeof(sll)) < 0)
		send_errors++;
}

/* dcbnl IEEE SET of a port's PFC: 0 or an errno */
static int set_pfc(unsigned int i, const struct ieee_pfc *pfc)
{
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = DCB_CMD_IEEE_SET };
	struct rtnl_msg m;
	struct nlattr *ieee;

	rtnl_msg_init(&m, RTM_SETDCB, 0, &d, sizeof(d));
	rtnl_msg_put_str(&m, DCB_ATTR_IFNAME, engine.port[i].name);
	ieee = rtnl_msg_put(&m, DCB_ATTR_IEEE, NULL, 0);
	rtnl_msg_put(&m, DCB_ATTR_IEEE_PFC, pfc, sizeof(*pfc));
	rtnl_msg_end_nest(&m, ieee);
	return rtnl_talk(&nl, &m);
}

/* A bfifo's limit changed in place: 0 or an errno */
static int set_fifo_limit(unsigned int i, unsigned int band, uint32_t limit)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC,
			   .tcm_ifindex = io[i].ifindex,
			   .tcm_handle = io[i].fifo_handle[band],
			   .tcm_parent = io[i].fifo_parent[band] };
	struct tc_fifo_qopt q = { .limit = limit };
	struct rtnl_msg m;

	rtnl_msg_init(&m, RTM_NEWQDISC, 0, &t, sizeof(t));
	rtnl_msg_put_str(&m, TCA_KIND, "bfifo");
	rtnl_msg_put(&m, TCA_OPTIONS, &q, sizeof(q));
	return rtnl_talk(&nl, &m);
}

/* The port's ets qdisc changed in place to plan w: 0 or an errno */
static int set_ets(unsigned int i, const struct swets *w)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC,
			   .tcm_ifindex = io[i].ifindex,
			   .tcm_handle = io[i].ets_handle,
			   .tcm_parent = io[i].ets_parent };
	struct nlattr *opts, *nest;
	struct rtnl_msg m;
	int b, p;

	rtnl_msg_init(&m, RTM_NEWQDISC, 0, &t, sizeof(t));
	rtnl_msg_put_str(&m, TCA_KIND, "ets");
	opts = rtnl_msg_put(&m, TCA_OPTIONS | NLA_F_NESTED, NULL, 0);
	rtnl_msg_put(&m, TCA_ETS_NBANDS, &w->bands, 1);
	if (w->strict)
		rtnl_msg_put(&m, TCA_ETS_NSTRICT, &w->strict, 1);
	if (w->bands > w->strict) {
		nest = rtnl_msg_put(&m, TCA_ETS_QUANTA | NLA_F_NESTED, NULL, 0);
		for (b = w->strict; b < w->bands; b++)
			rtnl_msg_put(&m, TCA_ETS_QUANTA_BAND, &w->quanta[b], 4);
		rtnl_msg_end_nest(&m, nest);
	}
	nest = rtnl_msg_put(&m, TCA_ETS_PRIOMAP | NLA_F_NESTED, NULL, 0);
	for (p = 0; p < SWETS_PRIOMAP; p++)
		rtnl_msg_put(&m, TCA_ETS_PRIOMAP_BAND, &w->priomap[p], 1);
	rtnl_msg_end_nest(&m, nest);
	rtnl_msg_end_nest(&m, opts);
	return rtnl_talk(&nl, &m);
}

/* Band b of port i gets a bfifo of limit bytes (handle 21: for band 1,
 * 22: for band 2 ... in tc's hex, as the lab's setup makes them), or with
 * limit 0 loses its own (the ets qdisc puts its default pfifo back): 0
 * or an errno.
 */
static int band_fifo(unsigned int i, unsigned int b, uint64_t limit)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC,
			   .tcm_ifindex = io[i].ifindex,
			   .tcm_parent = io[i].ets_handle | (b + 1) };
	struct tc_fifo_qopt q = { .limit = (uint32_t)limit };
	struct rtnl_msg m;

	if (!limit) {
		t.tcm_handle = io[i].fifo_handle[b];
		rtnl_msg_init(&m, RTM_DELQDISC, 0, &t, sizeof(t));
		return rtnl_talk(&nl, &m);
	}
	t.tcm_handle = TC_H_MAKE((0x21 + b) << 16, 0);
	rtnl_msg_init(&m, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, &t,
		      sizeof(t));
	rtnl_msg_put_str(&m, TCA_KIND, "bfifo");
	rtnl_msg_put(&m, TCA_OPTIONS, &q, sizeof(q));
	return rtnl_talk(&nl, &m);
}

/* "tsa ets,ets,ets,strict,... tc-bw 20,30,50,... prio-tc 0:0 1:0 ..." */
static void describe_dcb(const struct ieee_ets *e, char *buf, size_t len)
{
	size_t n = 0;
	int k;

	n += (size_t)snprintf(buf + n, len - n, "tsa");
	for (k = 0; k < SWETS_TCS && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%c%s", k ? ',' : ' ',
				      e->tc_tsa[k] == SWETS_TSA_ETS ? "ets" :
				      e->tc_tsa[k] ? "other" : "strict");
	for (k = 0; k < SWETS_TCS && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u",
				      k ? "," : " tc-bw ", e->tc_tx_bw[k]);
	for (k = 0; k < SWETS_TCS && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%d:%u",
				      k ? " " : " prio-tc ", k, e->prio_tc[k]);
}

/*
 * Port i's scheduler made what its DCB state asks for (swets.h): the ets
 * qdisc changed in place when it differs; then, at the next read (the
 * bands as they now are), the bfifos of the bands that hold a PFC
 * priority.  A stormed priority counts as PFC on: the watchdog's limit
 * of 0 on its band stays until the storm is over.
 */
static void enforce(unsigned int i)
{
	struct port_io *p = &io[i];
	const char *name = engine.port[i].name;
	uint8_t pfc = p->pfc_en;
	struct swets want;
	char plan[160], dcb[200];
	unsigned int b;
	int err;

	if (!p->dcb_ok || !p->ets_ok || !p->ets_handle)
		return;
	for (int prio = 0; prio < PFC_PRIOS; prio++)
		if (engine.port[i].stormed[prio])
			pfc |= (uint8_t)(1u << prio);
	swets_plan(p->ets.prio_tc, p->ets.tc_tsa, p->ets.tc_tx_bw, pfc, &want);
	if (!swets_same_qdisc(&want, &p->have)) {
		if (p->refused_set && swets_same_qdisc(&want, &p->refused) &&
		    swets_same_qdisc(&p->have, &p->refused_have))
			return;
		err = set_ets(i, &want);
		swets_describe(&want, plan, sizeof(plan));
		describe_dcb(&p->ets, dcb, sizeof(dcb));
		if (err) {
			p->refused = want;
			p->refused_have = p->have;
			p->refused_set = true;
			p->ets_errors++;
			printf("%.6f %s: ETS of its DCB (%s) not enforced: %s: "
			       "%s\n", now(), name, dcb, plan, strerror(err));
		} else {
			p->refused_set = false;
			p->ets_changes++;
			p->have = want;
			printf("%.6f %s: ETS enforced from its DCB (%s): %s\n",
			       now(), name, dcb, plan);
		}
		fflush(stdout);
		return;
	}
	if (!p->limit)
		return;
	for (b = 0; b < want.bands && b < PFC_MAX_BANDS; b++) {
		bool lossless = want.lossless & 1u << b;

		if (lossless == !!p->fifo_handle[b])
			continue;
		err = band_fifo(i, b, lossless ? p->limit : 0);
		/* made or removed since the dump (the lab's restore does) */
		if (err == (lossless ? EEXIST : ENOENT))
			continue;
		if (err)
			p->ets_errors++;
		else
			p->fifo_changes++;
		if (lossless)
			printf("%.6f %s: band %u holds a PFC priority: bfifo "
			       "limit %llu%s%s\n", now(), name, b + 1,
			       (unsigned long long)p->limit,
			       err ? ": " : "", err ? strerror(err) : "");
		else
			printf("%.6f %s: band %u holds no PFC priority: its "
			       "bfifo removed%s%s\n", now(), name, b + 1,
			       err ? ": " : "", err ? strerror(err) : "");
		fflush(stdout);
	}
}

/*
 * The watchdog's action (pfc.h): while port i's band of prio is stormed,
 * the port stops honouring its partner's pauses for prio (PFC off for it
 * in the driver, so that its queues, and the port's qdisc behind them,
 * move again) and its band drops what arrives (bfifo limit 0); both are
 * undone when the storm is over.
 */
static void on_storm(void *ctx, unsigned int i, int prio, bool stormed)
{
	unsigned int band = io[i].band_of[prio];
	struct ieee_pfc pfc = io[i].pfc;
	int err;

	(void)ctx;
	if (stormed)
		pfc.pfc_en &= (uint8_t)~(1u << prio);
	else
		pfc.pfc_en |= (uint8_t)(1u << prio);
	err = set_pfc(i, &pfc);
	if (err)
		printf("%.6f %s: PFC of priority %d %s: %s\n", now(),
		       engine.port[i].name, prio, stormed ? "off" : "on",
		       strerror(err));
	if (band >= PFC_MAX_BANDS || !io[i].fifo_handle[band])
		return;
	if (stormed)
		io[i].saved_limit[band] = io[i].fifo_limit[band];
	err = set_fifo_limit(i, band, stormed ? 0 : io[i].saved_limit[band]);
	if (err)
		printf("%.6f %s: band %u limit: %s\n", now(),
		       engine.port[i].name, band + 1, strerror(err));
	fflush(stdout);
}

/* lldpad writes its PFC configuration to the driver again on its own
 * time: a stormed priority it turned back on is turned off again.
 */
static void storms_kept(void)
{
	for (unsigned int i = 0; i < engine.nports; i++)
		for (int p = 0; p < PFC_PRIOS; p++)
			if (engine.port[i].stormed[p] && io[i].dcb_ok &&
			    io[i].pfc_en & 1u << p) {
				struct ieee_pfc pfc = io[i].pfc;

				pfc.pfc_en &= (uint8_t)~(1u << p);
				if (!set_pfc(i, &pfc))
					io[i].pfc_en = pfc.pfc_en;
			}
}

static void log_event(void *ctx, const char *line)
{
	(void)ctx;
	printf("%.6f %s\n", now(), line);
	fflush(stdout);
}

static void write_state(bool json_out)
{
	double t = now();
	char tmp[4096];
	FILE *f = stdout;
	unsigned int i;
	int p;

	if (!json_out) {
		if (!o.state)
			return;
		snprintf(tmp, sizeof(tmp), "%s.tmp", o.state);
		f = fopen(tmp, "w");
		if (!f)
			return;
	}
	new_json_obj(f, true);
	print_uint(PRINT_JSON, "send_errors", NULL, send_errors);
	print_uint(PRINT_JSON, "steps", NULL, steps);
	/* the guest's clock: what paused_ms is counted in */
	print_float(PRINT_JSON, "time", NULL, t);
	print_float(PRINT_JSON, "max_gap_ms", NULL, max_gap * 1e3);
	print_float(PRINT_JSON, "quanta", NULL, engine.quanta);
#define ARRAY(key, expr) do {					\
		open_json_array(key);				\
		for (p = 0; p < PFC_PRIOS; p++)			\
			expr;					\
		close_json_array();				\
	} while (0)
	open_json_array("ports");
	for (i = 0; i < engine.nports; i++) {
		const struct pfc_port *P = &engine.port[i];

		open_json_object(NULL);
		print_string(PRINT_JSON, "name", NULL, P->name);
		print_uint(PRINT_JSON, "xoff", NULL, P->xoff);
		print_uint(PRINT_JSON, "xon", NULL, P->xon);
		print_uint(PRINT_JSON, "pfc_en", NULL, io[i].pfc_en);
		print_uint(PRINT_JSON, "limit", NULL, io[i].limit);
		print_uint(PRINT_JSON, "ets_changes", NULL, io[i].ets_changes);
		print_uint(PRINT_JSON, "fifo_changes", NULL,
			   io[i].fifo_changes);
		print_uint(PRINT_JSON, "ets_errors", NULL, io[i].ets_errors);
		{
			char plan[160];

			swets_describe(&io[i].have, plan, sizeof(plan));
			print_string(PRINT_JSON, "ets", NULL,
				     io[i].ets_handle ? plan : "");
		}
		/* what the port runs, as dcbnl last said (dcb ets show) */
		if (io[i].ets_ok) {
			const struct ieee_ets *e = &io[i].ets;

			open_json_object("dcb");
			ARRAY("prio_tc", print_uint(PRINT_JSON, NULL, NULL,
						    e->prio_tc[p]));
			ARRAY("tc_tsa", print_string(PRINT_JSON, NULL, NULL,
				e->tc_tsa[p] == SWETS_TSA_ETS ? "ets" :
				e->tc_tsa[p] ? "other" : "strict"));
			ARRAY("tc_bw", print_uint(PRINT_JSON, NULL, NULL,
						  e->tc_tx_bw[p]));
			close_json_object();
		}
		ARRAY("xoff_sent", print_uint(PRINT_JSON, NULL, NULL,
					      P->xoff_sent[p]));
		ARRAY("xon_sent", print_uint(PRINT_JSON, NULL, NULL,
					     P->xon_sent[p]));
		ARRAY("paused_ms", print_float(PRINT_JSON, NULL, NULL,
			pfc_paused_time(P, p, t) * 1e3));
		ARRAY("paused", print_uint(PRINT_JSON, NULL, NULL,
					   P->paused[p]));
		ARRAY("congested", print_uint(PRINT_JSON, NULL, NULL,
					      P->congested[p]));
		ARRAY("stormed", print_uint(PRINT_JSON, NULL, NULL,
					    P->stormed[p]));
		ARRAY("storms", print_uint(PRINT_JSON, NULL, NULL,
					   P->storms[p]));
		ARRAY("episodes", print_uint(PRINT_JSON, NULL, NULL,
					     P->episodes[p]));
		ARRAY("peak_backlog", print_uint(PRINT_JSON, NULL, NULL,
						 P->peak_backlog[p]));
		ARRAY("reaction_ms", print_float(PRINT_JSON, NULL, NULL,
						 P->reaction_s[p] * 1e3));
#undef ARRAY
		close_json_object();
	}
	close_json_array();
	delete_json_obj();
	if (!json_out) {
		fclose(f);
		rename(tmp, o.state);
	}
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		reset_signal = 1;
	else
		stop_signal = sig;
}

static void sleep_until(double t)
{
	double left = t - now();
	struct timespec ts;

	if (left <= 0)
		return;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int setup(char **ports, int n)
{
	int one = 1, i, err;

	/* the command line first: a usage error opens no socket */
	for (i = 0; i < n; i++) {
		char name[16];
		uint64_t xoff, xon, limit;

		if (pfc_parse_port_arg(ports[i], name, &xoff, &xon, &limit))
			return usage_error("'%s' is not PORT:XOFF:XON[:LIMIT] "
					   "(bytes, XON <= XOFF, XOFF > 0, "
					   "LIMIT >= XOFF)", ports[i]);
		if (pfc_engine_add_port(&engine, name, xoff, xon))
			return usage_error("more than %d ports",
					   PFC_MAX_PORTS);
		io[i].limit = limit;
	}
	err = rtnl_open(&nl);
	if (err)
		return runtime_error("netlink: %s", strerror(err));
	pfd = socket(AF_PACKET, SOCK_RAW, 0);
	if (pfd < 0)
		return runtime_error("packet socket: %s", strerror(errno));
	if (setsockopt(pfd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)) < 0)
		return runtime_error("PACKET_QDISC_BYPASS: %s",
				     strerror(errno));
	for (i = 0; i < n; i++) {
		const char *name = engine.port[i].name;
		struct ifreq ifr = { 0 };

		io[i].ifindex = (int)if_nametoindex(name);
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
		if (!io[i].ifindex || ioctl(pfd, SIOCGIFHWADDR, &ifr) < 0)
			return runtime_error("port %s: %s", name,
					     strerror(errno));
		memcpy(io[i].mac, ifr.ifr_hwaddr.sa_data, 6);
	}
	return 0;
}

/* Is any band at half its port's XON threshold, or a pause on? Then the
 * backlog is read every --interval, else every --idle-interval.
 */
static bool busy(const struct pfc_sample *s)
{
	for (unsigned int i = 0; i < engine.nports; i++) {
		const struct pfc_port *P = &engine.port[i];

		for (unsigned int b = 0; b < s[i].bands && b < PFC_MAX_BANDS;
		     b++)
			if (s[i].backlog[b] * 2 >= P->xon)
				return true;
		for (int p = 0; p < PFC_PRIOS; p++)
			if (P->paused[p])
				return true;
	}
	return false;
}

/* Does a port have PFC on, or a priority stormed?  If not, no band's
 * backlog matters: the ports are read every --config-every only.
 */
static bool pfc_anywhere(void)
{
	for (unsigned int i = 0; i < engine.nports; i++) {
		if (io[i].pfc_en)
			return true;
		for (int p = 0; p < PFC_PRIOS; p++)
			if (engine.port[i].stormed[p] || engine.port[i].paused[p])
				return true;
	}
	return false;
}

/* A switch's control plane runs before its data plane: SCHED_FIFO, so
 * that forwarding (ksoftirqd, under load) does not delay an XOFF.
 */
static void realtime(void)
{
	struct sched_param sp = { .sched_priority = 10 };

	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		printf("%.6f pfcd: SCHED_FIFO: %s: running as a normal task\n",
		       now(), strerror(errno));
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct pfc_sample s[PFC_MAX_PORTS];
	double next, next_config = 0, next_state = 0, last = 0;
	int err;

	o.cli = (struct cli){ .shortopts = ":jh", .longopts = longopts,
			      .operands = "PORT:XOFF:XON[:LIMIT]...",
			      .any_operands = true, .usage = usage,
			      .set = set_option, .ctx = &o };
	progname = "pfcd";
	err = parse_options(argc, argv, &o.cli);
	if (err)
		return err;
	if (optind >= argc)
		return usage_error("no PORT:XOFF:XON[:LIMIT]");
	if (o.interval <= 0)
		return usage_error("--interval must be above 0");
	engine.quanta = (uint16_t)o.quanta;
	engine.refresh = o.refresh;
	engine.watchdog = o.watchdog;
	engine.restore = o.restore;
	engine.send = send_pfc;
	engine.event = log_event;
	engine.storm = on_storm;
	err = setup(argv + optind, argc - optind);
	if (err)
		return err;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	realtime();
	printf("%.6f pfcd: %u ports, XOFF %u quanta every %.0f ms, backlog "
	       "read every %.1f ms\n", now(), engine.nports, engine.quanta,
	       o.refresh * 1e3, o.interval * 1e3);
	fflush(stdout);

	next = now();
	while (!stop_signal) {
		double t = now();

		if (steps++ && t - last > max_gap)
			max_gap = t - last;
		last = t;

		if (reset_signal) {
			reset_signal = 0;
			pfc_engine_reset_figures(&engine);
			max_gap = 0;
			printf("%.6f pfcd: figures reset\n", now());
			fflush(stdout);
		}
		if (t >= next_config) {
			read_dcb();
			storms_kept();
			read_samples(s);
			for (unsigned int i = 0; i < engine.nports; i++)
				enforce(i);
			next_config += o.config_every;
			if (next_config <= t)
				next_config = t + o.config_every;
		} else {
			read_samples(s);
		}
		pfc_engine_step(&engine, s, now());
		if (t >= next_state) {
			write_state(false);
			next_state = t + 0.25;
		}
		next += busy(s) ? o.interval :
			pfc_anywhere() ? o.idle_interval : o.config_every;
		if (next > next_config)
			next = next_config;
		if (next < now())
			next = now();
		sleep_until(next);
	}
	pfc_engine_release(&engine);
	printf("%.6f pfcd: %s: XON sent for the pauses in effect, exiting\n",
	       now(), strsignal(stop_signal));
	fflush(stdout);
	write_state(false);
	if (o.cli.json)
		write_state(true);
	return 0;
}
