/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dcbfuzz's pure half: the dcbnl requests it sends (whole netlink
 * messages, malformed ones too), and what Linux 6.1's dcbnl plus the
 * virtio_net DCB driver (kernel-patches/0002) answer to each, with no
 * I/O, so the host's unit tests (test_dcbfuzz.c) run it on bytes.
 *
 * The model follows the kernel's own path for a request (read in
 * linux-source-6.1):
 *   - net/core/rtnetlink.c rtnetlink_rcv_msg(): a payload of 0 bytes is
 *     acked and nothing else; a GET with NLM_F_DUMP is EOPNOTSUPP (dcbnl
 *     has no dumpit).
 *   - net/dcb/dcbnl.c dcb_doit(): nlmsg_parse_deprecated() of the
 *     attributes after struct dcbmsg (a shorter payload is EINVAL) with
 *     dcbnl_rtnl_policy, lib/nlattr.c's liberal rules: types 0 and past
 *     DCB_ATTR_MAX and trailing bytes ignored, the first bad attribute in
 *     order decides (NLA_NUL_STRING: no NUL in the first 16 bytes EINVAL,
 *     longer than 15 ERANGE; NLA_U8 shorter than 1, a flag with data, a
 *     nest of 1..3 bytes ERANGE), the last of a type wins; then cmd past
 *     DCB_CMD_MAX EINVAL, no handler EOPNOTSUPP, no IFNAME EINVAL,
 *     unknown device ENODEV, a device without dcbnl ops EOPNOTSUPP.  All
 *     of these are netlink errors.
 *   - dcbnl_ieee_set()/dcbnl_ieee_del(): no DCB_ATTR_IEEE EINVAL, the
 *     nest parsed with dcbnl_ieee_policy (NLA_UNSPEC with .len: shorter
 *     ERANGE, longer taken) - netlink errors; then ETS, PFC, the APP
 *     table in that order, the first error stopping the rest (what came
 *     before stays): that error, or 0, is the u8 DCB_ATTR_IEEE of the
 *     reply.  An APP entry shorter than struct dcb_app is ERANGE on set
 *     and read as it lies (past its end) on delete.
 *   - the driver: TSA strict/ETS only, ETS bandwidths sum to 100,
 *     prio_tc < 8 (operational and reco) EINVAL; a map of more classes
 *     than TX queues EINVAL; a map of several classes while a layout the
 *     driver does not hold is in effect EBUSY; PFC always 0; APP selector
 *     1..5, priority < 8, DSCP < 64 EINVAL, then dcb_ieee_setapp()
 *     (EEXIST) / dcb_ieee_delapp() (ENOENT); setdcbx 0 only for 0x09,
 *     else 1 in DCB_ATTR_DCBX; CEE DCB_CMD_SAPP EOPNOTSUPP.
 *
 * The device's TX queue layout (num_tc, tc_to_txq, prio_tc_map) is
 * modelled as net/core/dev.c keeps it, stale entries included: the driver
 * sets it, mqprio sets it (and drops num_tc to 0 when it goes, or when
 * its init fails), ethtool -L re-partitions it (the driver) or trims it
 * (netif_setup_tc()).  A queue's traffic_class in sysfs is
 * netdev_txq_to_tc(), which searches all 16 entries.
 *
 * Churn (ethtool -L, an mqprio qdisc added or deleted) runs while
 * requests are answered; a request answered while a churn operation is
 * in flight may come before or after it.  struct dcm_world holds every
 * state the device can be in given what was observed, and keeps only
 * those that explain each answer.
 */
#ifndef DCBLAB_DCBMODEL_H
#define DCBLAB_DCBMODEL_H

#include "cgmodel.h"		/* struct cgm_rng: the one random source */

#include <linux/dcbnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a request is meant to exercise; the model decides its answer. */
enum dcm_category {
	DCM_ETS,		/* ETS sets that can pass the driver's checks */
	DCM_ETS_BAD,		/* TSA, bandwidth, prio_tc, reco refused */
	DCM_PFC,
	DCM_APP_ADD,		/* all selectors, priorities, DSCP, dups */
	DCM_APP_DEL,		/* present, absent, any selector */
	DCM_MIXED,		/* ETS, PFC and APP entries in one set */
	DCM_DCBX,		/* DCB_CMD_SDCBX with every u8, GDCBX */
	DCM_CEE,		/* DCB_CMD_SAPP, commands without a handler */
	DCM_GET,		/* DCB_CMD_IEEE_GET */
	DCM_MALFORMED,		/* truncated, oversized, missing attributes */
	DCM_DEVICE,		/* unknown devices, a device without dcbnl */
	DCM_NCATS
};

/* An answer: where it came from and its errno. */
enum dcm_outcome {
	DCM_OK,			/* a reply with 0 (or none needed) */
	DCM_ACK_ONLY,		/* an ack, no reply: empty payload */
	DCM_NL_EINVAL, DCM_NL_ERANGE, DCM_NL_ENODEV, DCM_NL_EOPNOTSUPP,
	DCM_IEEE_EINVAL, DCM_IEEE_EBUSY, DCM_IEEE_EEXIST, DCM_IEEE_ENOENT,
	DCM_IEEE_ERANGE,	/* DCB_ATTR_IEEE of the reply */
	DCM_DCBX_REFUSED,	/* DCB_ATTR_DCBX 1 */
	DCM_OTHER,		/* anything else: never allowed */
	DCM_NOUTCOMES
};

#define DCM_BIT(o)	(1u << (o))

const char *dcm_category_name(enum dcm_category c);	/* "ets" */
const char *dcm_outcome_name(enum dcm_outcome o);	/* "ieee_EBUSY" */
/* A netlink error (positive errno) as an outcome. */
enum dcm_outcome dcm_nl_outcome(int err);
/* The u8 of DCB_ATTR_IEEE (a negative errno as s8) as an outcome. */
enum dcm_outcome dcm_ieee_outcome(int8_t err);

/* The devices requests name. */
struct dcm_names {
	const char *dev;	/* the virtio_net device under test */
	const char *nodcb;	/* a device without dcbnl ops ("lo") */
	const char *unknown;	/* a prefix no device's name has */
};

#define DCM_NTC		16	/* TC_MAX_QUEUE, TC_BITMASK + 1 */
#define DCM_APP_MAX	192

/* What dcbfuzz knows of the device: one possible state. */
struct dcm_dev {
	uint8_t q;		/* real_num_tx_queues */
	uint8_t maxq;		/* max_queue_pairs */
	bool tc_set;		/* the driver's dcb_tc_set */
	bool mqprio;		/* dcbfuzz's mqprio is the root qdisc */
	uint8_t num_tc;		/* dev->num_tc */
	uint8_t prio_tc[DCM_NTC];	/* dev->prio_tc_map */
	struct { uint16_t count, offset; } tc[DCM_NTC];	/* tc_to_txq */
	struct ieee_ets ets;	/* the driver's stored ETS */
	uint8_t pfc_en;
	uint16_t pfc_delay;
	uint16_t napp;
	struct dcb_app app[DCM_APP_MAX];	/* newest first, as listed */
};

/* A clean device: q of maxq queues, no layout, driver defaults. */
void dcm_dev_init(struct dcm_dev *d, uint8_t q, uint8_t maxq);

/* ---- requests ---- */

#define DCM_MSG_MAX	2048

struct dcm_msg {
	union {
		uint8_t buf[DCM_MSG_MAX];
		uint32_t align;
	};
	size_t len;
};

/*
 * The answer 6.1 gives request msg on device state *d, and the state it
 * leaves (*d updated).  A delete that reads an APP entry past the
 * message's end gets DCM_OK or DCM_IEEE_ENOENT: *alt is then set to the
 * other (else DCM_NOUTCOMES) and *d is left as for the ENOENT.
 */
enum dcm_outcome dcm_eval(struct dcm_dev *d, const struct dcm_names *nm,
			  const uint8_t *msg, size_t len,
			  enum dcm_outcome *alt);

/* Does msg reach the driver's state (an IEEE set or delete)? */
bool dcm_changes_state(const uint8_t *msg, size_t len);
/* ... with an ETS attribute dcbnl passes on (an accepted one may change
 * the TX queue layout)? */
bool dcm_carries_ets(const uint8_t *msg, size_t len);

/* One request of category c into m (nlmsg_seq 0: the sender sets it). */
void dcm_generate(struct cgm_rng *r, enum dcm_category c,
		  const struct dcm_names *nm, struct dcm_msg *m);

/* ---- churn ---- */

enum dcm_churn_kind { DCM_CH_ETHTOOL, DCM_CH_TC_ADD, DCM_CH_TC_DEL,
		      DCM_CH_NKINDS };

enum dcm_churn_result { DCM_CR_OK, DCM_CR_EBUSY, DCM_CR_EINVAL,
			DCM_CR_EEXIST, DCM_CR_ENOENT, DCM_CR_OTHER,
			DCM_CR_NRESULTS };

struct dcm_churn {
	enum dcm_churn_kind kind;
	uint8_t n;		/* ethtool -L combined n */
	uint8_t num_tc;		/* mqprio num_tc */
	uint8_t map[DCM_NTC];
	uint16_t count[DCM_NTC], offset[DCM_NTC];
};

const char *dcm_churn_name(enum dcm_churn_kind k);	/* "ethtool" */
const char *dcm_churn_result_name(enum dcm_churn_result r);

/* The operation's result on *d, and *d after it. */
enum dcm_churn_result dcm_churn_apply(struct dcm_dev *d,
				      const struct dcm_churn *op);

/*
 * A churn operation for a device of q queues: ethtool -L 1..8, an mqprio
 * of 1..min(q, 8) classes partitioning the queues (now and then one the
 * kernel refuses), a delete.
 */
void dcm_churn_generate(struct cgm_rng *r, enum dcm_churn_kind k, uint8_t q,
			struct dcm_churn *op);
/* op's argv after argv0 (tc or ethtool) for dev, in buf; its count. */
int dcm_churn_argv(const struct dcm_churn *op, const char *dev,
		   char *buf, size_t size, char **argv, int max);

/* ---- what is observed ---- */

struct dcm_obs {
	struct ieee_ets ets;	/* DCB_CMD_IEEE_GET's */
	struct ieee_pfc pfc;
	uint16_t napp;
	struct dcb_app app[DCM_APP_MAX];
	bool have_sysfs;	/* the rest was read (quiescent device) */
	uint8_t q;		/* ETHTOOL_GCHANNELS combined_count */
	int traffic_class[DCM_NTC];	/* per queue < q; -1: EINVAL */
};

/* The GET's ETS/PFC/APP as state d gives them (have_sysfs: all). */
void dcm_expect(const struct dcm_dev *d, bool sysfs, struct dcm_obs *o);
/* Does o agree with d?  why (size bytes) says where not. */
bool dcm_obs_matches(const struct dcm_dev *d, const struct dcm_obs *o,
		     char *why, size_t size);

/* ---- the possible states ---- */

#define DCM_BRANCHES	48

struct dcm_branch {
	struct dcm_dev dev;
	bool churn_done;	/* the pending churn took effect */
	enum dcm_churn_result churn_pred;	/* ... with this result */
};

struct dcm_world {
	int n;
	bool churn_pending;
	struct dcm_churn op;
	int max_n;		/* the most branches seen at once */
	struct dcm_branch b[DCM_BRANCHES];
};

/*
 * The dcm_world_* calls share scratch space: one call at a time, whatever
 * the world (dcbfuzz holds its world_lock around each).
 */
void dcm_world_init(struct dcm_world *w, const struct dcm_dev *d);
void dcm_world_churn_begin(struct dcm_world *w, const struct dcm_churn *op);
/*
 * The churn operation ended with got: the states that explain it stay.
 * The results some state allows, as DCM_BIT()s; 0 is a mismatch (the
 * states are then all kept, the operation applied).
 */
unsigned int dcm_world_churn_end(struct dcm_world *w,
				 enum dcm_churn_result got);
/*
 * Request msg was answered got: the outcomes some state allows (0 never:
 * DCM_OTHER is allowed by none); the states that explain got stay.
 * When none does, every successor stays (a mismatch is reported once).
 */
unsigned int dcm_world_request(struct dcm_world *w,
			       const struct dcm_names *nm,
			       const uint8_t *msg, size_t len,
			       enum dcm_outcome got);
/*
 * Keep the states o agrees with (a pending churn taken or not); false,
 * all kept and why set, when none does.
 */
bool dcm_world_observe(struct dcm_world *w, const struct dcm_obs *o,
		       char *why, size_t size);
/* The TX queues in use: the same in every state (churn is serialised). */
uint8_t dcm_world_queues(const struct dcm_world *w);

/* The first n bytes of buf in hex into out (size bytes). */
void dcm_hex(const uint8_t *buf, size_t len, size_t n, char *out,
	     size_t size);

#endif
