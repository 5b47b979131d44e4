// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of dcbfuzz's pure parts: the model of what 6.1's dcbnl and the
 * virtio_net DCB driver (kernel-patches/0002) answer to a request
 * (dcbmodel.c), the TX queue layout it keeps, the churn it predicts, the
 * states it keeps while churn is in flight, and the requests it
 * generates.  Requests are built here with rtnl.c's builder, so the model
 * is checked on bytes another writer made.  The expected values come from
 * reading net/dcb/dcbnl.c, lib/nlattr.c, net/core/dev.c,
 * net/sched/sch_mqprio.c and the patch; the guest run
 * (tests/test_dcbnl_fuzz.py) holds the model to the kernel itself.
 */
#include "check.h"
#include "dcbmodel.h"
#include "rtnl.h"

#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

int checks_passed, checks_failed;

static const struct dcm_names nm = { .dev = "eth0", .nodcb = "lo",
				     .unknown = "dcbfz-u" };

/* A request: RTM_SETDCB (or type) of cmd, IFNAME dev unless NULL. */
static void req(struct rtnl_msg *m, uint16_t type, uint8_t cmd,
		const char *dev)
{
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = cmd };

	rtnl_msg_init(m, type, 0, &d, sizeof(d));
	if (dev)
		rtnl_msg_put_str(m, DCB_ATTR_IFNAME, dev);
}

static enum dcm_outcome eval(struct dcm_dev *d, struct rtnl_msg *m)
{
	enum dcm_outcome alt;

	return dcm_eval(d, &nm, (const uint8_t *)m->buf, m->len, &alt);
}

/* IEEE_SET (or DEL) of one attribute in DCB_ATTR_IEEE. */
static enum dcm_outcome ieee(struct dcm_dev *d, uint8_t cmd, uint16_t type,
			     const void *data, size_t len)
{
	struct rtnl_msg m;
	struct nlattr *n;

	req(&m, RTM_SETDCB, cmd, "eth0");
	n = rtnl_msg_put(&m, DCB_ATTR_IEEE, NULL, 0);
	rtnl_msg_put(&m, type, data, len);
	rtnl_msg_end_nest(&m, n);
	return eval(d, &m);
}

static enum dcm_outcome set_ets(struct dcm_dev *d, const struct ieee_ets *e)
{
	return ieee(d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS, e, sizeof(*e));
}

/* APP entries (4 bytes each unless len) in one IEEE set or delete. */
static enum dcm_outcome apps(struct dcm_dev *d, uint8_t cmd,
			     const struct dcb_app *a, int n, size_t len)
{
	struct rtnl_msg m;
	struct nlattr *ie, *t;

	req(&m, RTM_SETDCB, cmd, "eth0");
	ie = rtnl_msg_put(&m, DCB_ATTR_IEEE, NULL, 0);
	t = rtnl_msg_put(&m, DCB_ATTR_IEEE_APP_TABLE, NULL, 0);
	for (int i = 0; i < n; i++)
		rtnl_msg_put(&m, DCB_ATTR_IEEE_APP, &a[i], len);
	rtnl_msg_end_nest(&m, t);
	rtnl_msg_end_nest(&m, ie);
	return eval(d, &m);
}

static struct ieee_ets map(const char *digits)
{
	struct ieee_ets e = { 0 };

	for (int p = 0; p < 8; p++)
		e.prio_tc[p] = (uint8_t)(digits[p] - '0');
	return e;
}

static struct dcm_dev dev8(void)
{
	struct dcm_dev d;

	dcm_dev_init(&d, 8, 8);
	return d;
}

static bool classes(const struct dcm_dev *d, const char *want)
{
	struct dcm_obs o;

	dcm_expect(d, true, &o);
	for (unsigned int q = 0; q < d->q; q++)
		if (o.traffic_class[q] != (want[q] == '-' ? -1 :
					   want[q] - '0'))
			return false;
	return strlen(want) == d->q;
}

static void test_ets_map_partitions_the_queues_first_classes_one_more(void)
{
	struct dcm_dev d = dev8();
	struct ieee_ets e = map("00112220");
	struct dcm_obs o;

	CHECK(set_ets(&d, &e) == DCM_OK);
	CHECK(d.num_tc == 3 && d.tc_set);
	CHECK(classes(&d, "00011122"));		/* 3, 3, 2 */
	dcm_expect(&d, true, &o);
	CHECK(!memcmp(o.ets.prio_tc, e.prio_tc, 8) && o.ets.ets_cap == 8);
	/* priorities 8..15 are in TC 0 */
	CHECK(d.prio_tc[8] == 0 && d.prio_tc[15] == 0);
	/* a map of one class drops the partition */
	e = map("00000000");
	CHECK(set_ets(&d, &e) == DCM_OK);
	CHECK(d.num_tc == 0 && !d.tc_set && classes(&d, "00000000"));
}

static void test_ets_refusals_are_einval_in_the_reply(void)
{
	struct dcm_dev d = dev8();
	struct ieee_ets e = map("01000000");

	e.tc_tsa[3] = IEEE_8021QAZ_TSA_CB_SHAPER;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	e = map("01000000");
	e.tc_tsa[0] = e.tc_tsa[1] = IEEE_8021QAZ_TSA_ETS;
	e.tc_tx_bw[0] = 50;
	e.tc_tx_bw[1] = 49;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	e.tc_tx_bw[1] = 50;
	CHECK(set_ets(&d, &e) == DCM_OK);
	/* shares of strict classes are not summed */
	e = map("00000000");
	e.tc_tx_bw[5] = 255;
	CHECK(set_ets(&d, &e) == DCM_OK);
	e.prio_tc[7] = 8;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	e = map("00000000");
	e.reco_prio_tc[0] = 200;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	e = map("00000000");
	e.tc_reco_tsa[1] = IEEE_8021QAZ_TSA_ETS;
	e.tc_reco_bw[1] = 99;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	e = map("00000000");
	e.tc_reco_tsa[0] = IEEE_8021QAZ_TSA_VENDOR;
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	/* more classes than TX queues */
	dcm_dev_init(&d, 2, 8);
	e = map("01200000");
	CHECK(set_ets(&d, &e) == DCM_IEEE_EINVAL);
	/* refused sets change nothing: the last accepted is reported */
	CHECK(d.ets.prio_tc[1] == 0 && d.num_tc == 0);
}

static void test_ets_attribute_length_is_a_minimum(void)
{
	struct dcm_dev d = dev8();
	uint8_t buf[80] = { 0 };

	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS, buf, 58) ==
	      DCM_NL_ERANGE);
	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS, buf, 80) ==
	      DCM_OK);
	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_PFC, buf, 20) ==
	      DCM_NL_ERANGE);
	/* no op for them: checked for length, then ignored */
	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_MAXRATE, buf, 64) ==
	      DCM_OK);
	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_MAXRATE, buf, 63) ==
	      DCM_NL_ERANGE);
	CHECK(ieee(&d, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_PEER_ETS, buf, 3) ==
	      DCM_OK);
}

static void test_qdisc_layout_makes_several_classes_ebusy(void)
{
	struct dcm_dev d = dev8();
	struct dcm_churn add = { .kind = DCM_CH_TC_ADD, .num_tc = 2,
				 .count = { 4, 4 }, .offset = { 0, 4 },
				 .map = { 0, 0, 0, 1 } };
	struct ieee_ets e = map("01000000");

	CHECK(dcm_churn_apply(&d, &add) == DCM_CR_OK && d.mqprio);
	CHECK(set_ets(&d, &e) == DCM_IEEE_EBUSY);
	e = map("00000000");
	e.willing = 1;
	CHECK(set_ets(&d, &e) == DCM_OK);	/* one class: layout kept */
	CHECK(d.num_tc == 2 && d.ets.willing == 1);
	/* getets reports the qdisc's map */
	struct dcm_obs o;

	dcm_expect(&d, true, &o);
	CHECK(o.ets.prio_tc[3] == 1 && classes(&d, "00001111"));
	/* an mqprio's layout equal to the driver's is still the mqprio's */
	struct dcm_churn del = { .kind = DCM_CH_TC_DEL };

	CHECK(dcm_churn_apply(&d, &del) == DCM_CR_OK && !d.num_tc);
	e = map("00010000");
	CHECK(set_ets(&d, &e) == DCM_OK && d.tc_set);
	CHECK(dcm_churn_apply(&d, &add) == DCM_CR_OK);
	e = map("00110000");
	CHECK(set_ets(&d, &e) == DCM_IEEE_EBUSY);
	CHECK(d.prio_tc[2] == 0 && d.num_tc == 2);
	e = map("00000000");
	CHECK(set_ets(&d, &e) == DCM_OK);	/* one class: mqprio's kept */
	CHECK(d.num_tc == 2 && d.prio_tc[3] == 1);
}

static void test_churn_results(void)
{
	struct dcm_dev d = dev8();
	struct ieee_ets e = map("01234000");
	struct dcm_churn eth = { .kind = DCM_CH_ETHTOOL, .n = 4 };
	struct dcm_churn del = { .kind = DCM_CH_TC_DEL };
	struct dcm_churn bad = { .kind = DCM_CH_TC_ADD, .num_tc = 1,
				 .count = { 9 } };

	CHECK(set_ets(&d, &e) == DCM_OK && d.num_tc == 5);
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_EBUSY && d.q == 8);
	eth.n = 6;
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_OK && d.q == 6);
	CHECK(classes(&d, "001234"));		/* re-partitioned */
	eth.n = 8;
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_OK);
	CHECK(classes(&d, "00112234"));	/* 2, 2, 2, 1, 1 */
	eth.n = 8;
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_OK);	/* no change */
	CHECK(dcm_churn_apply(&d, &del) == DCM_CR_ENOENT);
	/* a refused mqprio still drops the layout (mqprio_destroy()) */
	CHECK(dcm_churn_apply(&d, &bad) == DCM_CR_EINVAL);
	CHECK(d.num_tc == 0 && d.tc_set && !d.mqprio);
	CHECK(classes(&d, "00000000"));
	/* ... and the driver no longer holds it: ethtool is free */
	eth.n = 2;
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_OK && !d.tc_set);
	eth.n = 9;
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_EINVAL);
}

static void test_shrinking_trims_a_qdisc_layout_and_stale_classes_show(void)
{
	struct dcm_dev d = dev8();
	struct ieee_ets e = map("01230000");
	struct dcm_churn add = { .kind = DCM_CH_TC_ADD, .num_tc = 2,
				 .count = { 1, 1 }, .offset = { 0, 1 },
				 .map = { 1, 1 } };
	struct dcm_churn eth = { .kind = DCM_CH_ETHTOOL, .n = 1 };

	CHECK(set_ets(&d, &e) == DCM_OK);	/* 2, 2, 2, 2 */
	CHECK(dcm_churn_apply(&d, &add) == DCM_CR_OK);
	/* netdev_txq_to_tc() searches all 16 entries: the driver's class
	 * entries 2 and 3 are still there */
	CHECK(classes(&d, "01--2233"));
	/* 1 queue: TC 1 is out of range, its priorities go to TC 0;
	 * priority 0 is not looked at */
	CHECK(dcm_churn_apply(&d, &eth) == DCM_CR_OK);
	CHECK(d.num_tc == 2 && d.prio_tc[0] == 1 && d.prio_tc[1] == 0);
}

static void test_app_entries(void)
{
	struct dcm_dev d = dev8();
	struct dcb_app a = { .selector = 3, .priority = 5, .protocol = 4791 };
	struct dcb_app two[2] = { { .selector = 5, .priority = 1,
				    .protocol = 10 },
				  { .selector = 5, .priority = 1,
				    .protocol = 64 } };

	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_OK);
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_IEEE_EEXIST);
	a.priority = 6;		/* another priority: a second entry */
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_OK && d.napp == 2);
	a.priority = 8;
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_IEEE_EINVAL);
	a.priority = 1;
	a.selector = 0;
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_IEEE_EINVAL);
	a.selector = 6;
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 4) == DCM_IEEE_EINVAL);
	/* the first entry stays when the second is refused */
	CHECK(apps(&d, DCB_CMD_IEEE_SET, two, 2, 4) == DCM_IEEE_EINVAL);
	CHECK(d.napp == 3 && d.app[0].protocol == 10);
	CHECK(apps(&d, DCB_CMD_IEEE_SET, &a, 1, 3) == DCM_IEEE_ERANGE);
	/* deletes: no checks, absent is ENOENT */
	CHECK(apps(&d, DCB_CMD_IEEE_DEL, &a, 1, 4) == DCM_IEEE_ENOENT);
	CHECK(apps(&d, DCB_CMD_IEEE_DEL, two, 1, 4) == DCM_OK && d.napp == 2);
	/* a short entry is read past its end: padding is 0 */
	struct dcb_app b = { .selector = 3, .priority = 6, .protocol = 0 };

	CHECK(apps(&d, DCB_CMD_IEEE_SET, &b, 1, 4) == DCM_OK);
	CHECK(apps(&d, DCB_CMD_IEEE_DEL, &b, 1, 2) == DCM_OK);
	CHECK(apps(&d, DCB_CMD_IEEE_DEL, &b, 1, 2) == DCM_IEEE_ENOENT);
}

static void test_dcbx_mode(void)
{
	struct dcm_dev d = dev8();
	struct rtnl_msg m;
	uint8_t v[2] = { 0x09, 0x04 };

	req(&m, RTM_SETDCB, DCB_CMD_SDCBX, "eth0");
	rtnl_msg_put(&m, DCB_ATTR_DCBX, v, 1);
	CHECK(eval(&d, &m) == DCM_OK);
	req(&m, RTM_SETDCB, DCB_CMD_SDCBX, "eth0");
	rtnl_msg_put(&m, DCB_ATTR_DCBX, v + 1, 1);
	CHECK(eval(&d, &m) == DCM_DCBX_REFUSED);
	req(&m, RTM_SETDCB, DCB_CMD_SDCBX, "eth0");
	rtnl_msg_put(&m, DCB_ATTR_DCBX, v, 2);	/* a warning; the 1st byte */
	CHECK(eval(&d, &m) == DCM_OK);
	req(&m, RTM_SETDCB, DCB_CMD_SDCBX, "eth0");
	rtnl_msg_put(&m, DCB_ATTR_DCBX, v, 0);
	CHECK(eval(&d, &m) == DCM_NL_ERANGE);
	req(&m, RTM_SETDCB, DCB_CMD_SDCBX, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	req(&m, RTM_GETDCB, DCB_CMD_GDCBX, "eth0");
	CHECK(eval(&d, &m) == DCM_OK);
}

static void test_cee_app_is_refused(void)
{
	struct dcm_dev d = dev8();
	struct rtnl_msg m;
	struct nlattr *n;
	uint8_t idtype = 1, prio = 3;
	uint16_t id = 4791;

	req(&m, RTM_SETDCB, DCB_CMD_SAPP, "eth0");
	n = rtnl_msg_put(&m, DCB_ATTR_APP, NULL, 0);
	rtnl_msg_put(&m, DCB_APP_ATTR_IDTYPE, &idtype, 1);
	rtnl_msg_put(&m, DCB_APP_ATTR_ID, &id, 2);
	rtnl_msg_put(&m, DCB_APP_ATTR_PRIORITY, &prio, 1);
	rtnl_msg_end_nest(&m, n);
	CHECK(eval(&d, &m) == DCM_NL_EOPNOTSUPP);
	idtype = 2;
	req(&m, RTM_SETDCB, DCB_CMD_SAPP, "eth0");
	n = rtnl_msg_put(&m, DCB_ATTR_APP, NULL, 0);
	rtnl_msg_put(&m, DCB_APP_ATTR_IDTYPE, &idtype, 1);
	rtnl_msg_put(&m, DCB_APP_ATTR_ID, &id, 1);	/* short u16 */
	rtnl_msg_end_nest(&m, n);
	CHECK(eval(&d, &m) == DCM_NL_ERANGE);
	req(&m, RTM_SETDCB, DCB_CMD_SAPP, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	req(&m, RTM_GETDCB, DCB_CMD_GSTATE, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EOPNOTSUPP);
}

static void test_names_and_headers(void)
{
	struct dcm_dev d = dev8();
	struct rtnl_msg m;
	char name[24] = "eth0";

	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, "lo");
	CHECK(eval(&d, &m) == DCM_NL_EOPNOTSUPP);
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, "dcbfz-u7");
	CHECK(eval(&d, &m) == DCM_NL_ENODEV);
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, NULL);
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, NULL);	/* NULs past 15 */
	rtnl_msg_put(&m, DCB_ATTR_IFNAME, name, 20);
	CHECK(eval(&d, &m) == DCM_NL_ERANGE);
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, NULL);	/* junk after NUL */
	memcpy(name + 5, "jj", 2);
	rtnl_msg_put(&m, DCB_ATTR_IFNAME, name, 7);
	CHECK(eval(&d, &m) == DCM_OK);
	memset(name, 'x', sizeof(name));	/* no NUL in 16 bytes */
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, NULL);
	rtnl_msg_put(&m, DCB_ATTR_IFNAME, name, 17);
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	req(&m, RTM_GETDCB, DCB_CMD_MAX + 1, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	req(&m, RTM_GETDCB, DCB_CMD_UNDEFINED, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EOPNOTSUPP);
	req(&m, RTM_GETDCB, DCB_CMD_IEEE_GET, "eth0");
	((struct nlmsghdr *)m.buf)->nlmsg_flags |= NLM_F_DUMP;
	CHECK(eval(&d, &m) == DCM_NL_EOPNOTSUPP);
	req(&m, RTM_SETDCB, DCB_CMD_IEEE_GET, "eth0");
	m.len = NLMSG_HDRLEN;
	((struct nlmsghdr *)m.buf)->nlmsg_len = (uint32_t)m.len;
	CHECK(eval(&d, &m) == DCM_ACK_ONLY);
	m.len = NLMSG_HDRLEN + 2;
	((struct nlmsghdr *)m.buf)->nlmsg_len = (uint32_t)m.len;
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);
	/* the first bad attribute decides */
	req(&m, RTM_SETDCB, DCB_CMD_IEEE_SET, "eth0");
	rtnl_msg_put(&m, DCB_ATTR_IEEE, name, 2);
	CHECK(eval(&d, &m) == DCM_NL_ERANGE);
	req(&m, RTM_SETDCB, DCB_CMD_IEEE_SET, "eth0");
	CHECK(eval(&d, &m) == DCM_NL_EINVAL);		/* no IEEE nest */
}

static void test_world_keeps_both_sides_of_a_churn_in_flight(void)
{
	struct dcm_dev d = dev8();
	struct dcm_world w;
	struct dcm_churn add = { .kind = DCM_CH_TC_ADD, .num_tc = 2,
				 .count = { 4, 4 }, .offset = { 0, 4 } };
	struct ieee_ets e = map("01000000");
	struct rtnl_msg m;
	struct nlattr *n;
	unsigned int allowed;

	dcm_world_init(&w, &d);
	dcm_world_churn_begin(&w, &add);
	req(&m, RTM_SETDCB, DCB_CMD_IEEE_SET, "eth0");
	n = rtnl_msg_put(&m, DCB_ATTR_IEEE, NULL, 0);
	rtnl_msg_put(&m, DCB_ATTR_IEEE_ETS, &e, sizeof(e));
	rtnl_msg_end_nest(&m, n);
	/* before the qdisc: accepted; after it: EBUSY */
	allowed = dcm_world_request(&w, &nm, (uint8_t *)m.buf, m.len,
				    DCM_IEEE_EBUSY);
	CHECK(allowed == (DCM_BIT(DCM_OK) | DCM_BIT(DCM_IEEE_EBUSY)));
	CHECK(w.n == 1 && w.b[0].churn_done);
	CHECK(dcm_world_churn_end(&w, DCM_CR_OK) == 1u << DCM_CR_OK);
	CHECK(!w.churn_pending && w.b[0].dev.mqprio);
	/* a result the states cannot give */
	dcm_world_churn_begin(&w, &add);
	CHECK(dcm_world_churn_end(&w, DCM_CR_OK) == 0);
}

static void test_world_read_back_tells_states_apart(void)
{
	struct dcm_dev d = dev8();
	struct dcm_world w;
	struct dcm_churn eth = { .kind = DCM_CH_ETHTOOL, .n = 4 };
	struct dcm_obs o;
	char why[160];

	dcm_world_init(&w, &d);
	dcm_world_churn_begin(&w, &eth);
	d.q = 4;
	dcm_expect(&d, false, &o);	/* ets_cap 4: the churn took effect */
	CHECK(dcm_world_observe(&w, &o, why, sizeof(why)));
	CHECK(w.n == 1 && w.b[0].churn_done);
	o.ets.ets_cap = 3;
	CHECK(!dcm_world_observe(&w, &o, why, sizeof(why)));
	CHECK(strstr(why, "ets_cap 3") != NULL);
}

static void test_same_seed_same_requests(void)
{
	struct cgm_rng a, b;
	static struct dcm_msg ma, mb;

	cgm_seed(&a, 42, 0);
	cgm_seed(&b, 42, 0);
	for (int i = 0; i < 500; i++) {
		enum dcm_category c = (enum dcm_category)(i % DCM_NCATS);

		dcm_generate(&a, c, &nm, &ma);
		dcm_generate(&b, c, &nm, &mb);
		CHECK(ma.len == mb.len && !memcmp(ma.buf, mb.buf, ma.len));
	}
}

static void test_categories_reach_their_outcomes(void)
{
	static uint64_t seen[DCM_NCATS][DCM_NOUTCOMES];
	static struct dcm_msg m;
	unsigned int total = 0;
	struct dcm_dev d = dev8();
	struct cgm_rng r;

	cgm_seed(&r, 7, 0);
	for (int i = 0; i < 40000; i++) {
		enum dcm_category c = (enum dcm_category)(i % DCM_NCATS);
		enum dcm_outcome o, alt;

		dcm_generate(&r, c, &nm, &m);
		o = dcm_eval(&d, &nm, m.buf, m.len, &alt);
		seen[c][o]++;
		CHECK(alt == DCM_NOUTCOMES);	/* nothing read past the end */
		CHECK(d.napp <= 160);
	}
	for (int c = 0; c < DCM_NCATS; c++) {
		CHECK(!seen[c][DCM_OTHER]);
		for (int o = 0; o < DCM_NOUTCOMES; o++)
			if (seen[c][o])
				total |= DCM_BIT(o);
	}
	/* every outcome but those of churn (EBUSY) and "other" */
	CHECK(total == ((DCM_BIT(DCM_OTHER) - 1) & ~DCM_BIT(DCM_IEEE_EBUSY)));
	CHECK(seen[DCM_ETS][DCM_OK] > seen[DCM_ETS][DCM_IEEE_EINVAL]);
	CHECK(seen[DCM_ETS_BAD][DCM_IEEE_EINVAL] > seen[DCM_ETS_BAD][DCM_OK]);
	CHECK(seen[DCM_APP_ADD][DCM_IEEE_EEXIST] &&
	      seen[DCM_APP_ADD][DCM_IEEE_ERANGE]);
	CHECK(seen[DCM_APP_DEL][DCM_OK] && seen[DCM_APP_DEL][DCM_IEEE_ENOENT]);
	CHECK(seen[DCM_DCBX][DCM_DCBX_REFUSED] && seen[DCM_DCBX][DCM_OK]);
	CHECK(seen[DCM_DEVICE][DCM_NL_ENODEV] &&
	      seen[DCM_DEVICE][DCM_NL_EOPNOTSUPP]);
	CHECK(seen[DCM_MALFORMED][DCM_ACK_ONLY]);
}

static void test_churn_generation_and_argv(void)
{
	struct cgm_rng r;
	struct dcm_churn op;
	char buf[512], *argv[48];
	int refused = 0;

	cgm_seed(&r, 3, 0);
	for (int i = 0; i < 2000; i++) {
		struct dcm_dev d = dev8();

		d.q = (uint8_t)(1 + i % 8);
		dcm_churn_generate(&r, DCM_CH_TC_ADD, d.q, &op);
		CHECK(op.num_tc >= 1 && op.num_tc <= d.q);
		refused += dcm_churn_apply(&d, &op) == DCM_CR_EINVAL;
	}
	CHECK(refused > 100 && refused < 600);
	CHECK(dcm_churn_argv(&op, "eth0", buf, sizeof(buf), argv, 48) > 0);
	CHECK(!strcmp(argv[0], "qdisc") && !strcmp(argv[7], "mqprio"));
	op = (struct dcm_churn){ .kind = DCM_CH_ETHTOOL, .n = 3 };
	CHECK(dcm_churn_argv(&op, "eth0", buf, sizeof(buf), argv, 48) == 4);
	CHECK(!strcmp(argv[0], "-L") && !strcmp(argv[3], "3") && !argv[4]);
}

int main(void)
{
	test_ets_map_partitions_the_queues_first_classes_one_more();
	test_ets_refusals_are_einval_in_the_reply();
	test_ets_attribute_length_is_a_minimum();
	test_qdisc_layout_makes_several_classes_ebusy();
	test_churn_results();
	test_shrinking_trims_a_qdisc_layout_and_stale_classes_show();
	test_app_entries();
	test_dcbx_mode();
	test_cee_app_is_refused();
	test_names_and_headers();
	test_world_keeps_both_sides_of_a_churn_in_flight();
	test_world_read_back_tells_states_apart();
	test_same_seed_same_requests();
	test_categories_reach_their_outcomes();
	test_churn_generation_and_argv();
	printf("test_dcbfuzz: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed ? 1 : 0;
}
