// SPDX-License-Identifier: GPL-2.0
/*
 * dcbfuzz - fuzz dcbnl requests to a virtio_net device with the DCB
 * driver (kernel-patches/0002) while its TX queues and qdisc change
 * underneath, and check every answer.
 *
 * Request threads send generated RTM_GETDCB/RTM_SETDCB requests (IEEE
 * ETS, PFC and APP sets and deletes, valid and refused; DCBX mode sets
 * with every u8; CEE APP; truncated, oversized and missing attributes;
 * unknown devices: dcbmodel.h) and compare each answer - a netlink error,
 * or the u8 the reply carries in DCB_ATTR_IEEE or DCB_ATTR_DCBX - with
 * what Linux 6.1's dcbnl and the driver give (dcbmodel.c); an answer the
 * model does not allow is a mismatch.  After each accepted set that
 * carries ETS, and every CHECK_EVERY requests, a thread reads
 * DCB_CMD_IEEE_GET back (ETS with ets_cap and the prio_tc map in effect,
 * PFC, the APP table) and, while no churn is in flight, the TX queues in
 * use and each queue's traffic_class in sysfs, and checks them against
 * the model's states.
 *
 * Meanwhile two threads churn, each running one command at a time (one
 * of the two at a time): ethtool -L DEV combined 1..8, and tc adding and
 * deleting an mqprio root qdisc (handle 77:).  Their results (refusals
 * included) are predicted by the model too.  A request answered while a
 * command is in flight may have come before or after it: the model keeps
 * both states until an answer or a read-back tells them apart.
 *
 * Requests that change the driver's state (IEEE sets and deletes) and
 * the read-backs are sent one at a time (the kernel serialises them under
 * the RTNL anyway); the others overlap freely.
 *
 * The device is put in a known state first (its layout cleared through
 * the driver, DCB at the driver's defaults) and restored on every way out,
 * SIGINT, SIGTERM and SIGHUP included: the mqprio qdisc deleted, ETS (all
 * priorities in TC 0, strict), PFC off, no APP entries, the queue count
 * found at start.  It refuses to start on a device with an mqprio or
 * taprio root qdisc.
 *
 * Exit 0 when every answer and read-back matched the model, the churn
 * met no unexpected error and the device was restored; 1 otherwise (or
 * when interrupted by a signal, or on a runtime error); 2 on usage.
 */
#define _GNU_SOURCE		/* pipe2 */
#include "dcbmodel.h"
#include "fuzzrun.h"
#include "rtnl.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS	16
#define CHECK_EVERY	256	/* requests between full read-backs */
#define EXAMPLES	10	/* mismatches kept for the JSON */
#define REPLY_MAX	16384
#define ETHTOOL		"/sbin/ethtool"
#define TC		"/sbin/tc"

/* How often each category is drawn. */
static const unsigned int weights[DCM_NCATS] = {
	[DCM_ETS] = 18, [DCM_ETS_BAD] = 10, [DCM_PFC] = 6,
	[DCM_APP_ADD] = 14, [DCM_APP_DEL] = 12, [DCM_MIXED] = 8,
	[DCM_DCBX] = 8, [DCM_CEE] = 5, [DCM_GET] = 5, [DCM_MALFORMED] = 10,
	[DCM_DEVICE] = 4,
};

enum { CHURN_ETHTOOL, CHURN_TC, NCHURNERS };
static const char *const churner_name[NCHURNERS] = { "ethtool", "tc" };

struct opts {
	struct cli cli;
	uint64_t seed, requests, threads;
	bool seed_set;
	bool churn[NCHURNERS];
	double seconds;
	const char *dev;
};

struct worker {
	int idx;
	struct fuzz_thread th;
	struct cgm_rng rng;	/* the requests: the seed's, whatever the
				 * answers */
	struct rtnl nl;
	uint64_t count[DCM_NCATS][DCM_NOUTCOMES];
	uint64_t mismatches, checks, check_errors, since_check;
	struct dcm_msg msg;
	union {
		uint8_t reply[REPLY_MAX];
		struct nlmsghdr align;
	};
	size_t reply_len;
};

struct example {
	enum dcm_category cat;
	unsigned int allowed;
	enum dcm_outcome got;
	char request[200];
};

static struct {
	struct opts o;
	struct dcm_names names;
	uint8_t start_q, maxq;
	bool touched;			/* the device was changed: restore */
	struct worker w[MAX_THREADS];
	struct fuzz_thread churner[NCHURNERS];
	atomic_ullong tickets;
	atomic_int workers_done;
	atomic_bool stop;
	/* world_lock: the model's states; held across each request that
	 * changes the driver and each read-back.  churn_lock: one churn
	 * command at a time; taken before world_lock. */
	pthread_mutex_t world_lock, churn_lock, lock;
	struct dcm_world world;
	struct dcm_dev clean;		/* for requests that change nothing */
	uint64_t churn_count[DCM_CH_NKINDS][DCM_CR_NRESULTS];
	uint64_t churn_mismatches, churn_errors;
	struct example ex[EXAMPLES];	/* lock: these and stderr lines */
	int nex;
	bool restored;
	char restore_why[200];
} g = {
	.world_lock = PTHREAD_MUTEX_INITIALIZER,
	.churn_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static void usage(void)
{
	printf(
"usage: dcbfuzz [OPTIONS]\n"
"Fuzz dcbnl requests (IEEE ETS/PFC/APP, DCBX, CEE, malformed) to a\n"
"virtio_net device with the dcblab DCB driver against a model of Linux\n"
"6.1, while ethtool -L and an mqprio qdisc churn its TX queue layout.\n"
"  -s, --seed N         seed of the requests (default: from the clock;\n"
"                       printed, so a run's requests can be replayed)\n"
"  -n, --requests N     requests in all, 1..10^9 (default 100000)\n"
"  -t, --seconds S      stop after S seconds even if short of --requests\n"
"                       (default 600)\n"
"  -w, --threads N      request threads, 1..%d (default 2)\n"
"  -d, --dev NAME       the device (default eth0)\n"
"  -c, --churn LIST     what changes meanwhile: a comma list of ethtool\n"
"                       (-L combined 1..8), tc (mqprio add/delete), or\n"
"                       none (default ethtool,tc)\n"
"  -j, --json           print one JSON object\n"
"  -h, --help           this text\n"
"Runs " ETHTOOL " and " TC ".  Restores the device on exit (queues, qdisc,\n"
"ETS, PFC, APP).  Exit 0 clean, 1 mismatches/errors/signal, 2 usage.\n",
		MAX_THREADS);
}

static const struct option longopts[] = {
	OPTION_ARG("seed", 's'), OPTION_ARG("requests", 'n'),
	OPTION_ARG("seconds", 't'), OPTION_ARG("threads", 'w'),
	OPTION_ARG("dev", 'd'), OPTION_ARG("churn", 'c'),
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	switch (c) {
	case 'c':
		return fuzz_parse_churn(arg, churner_name, NCHURNERS,
						o->churn);
	case 's':
		o->seed_set = true;
		return parse_u64("--seed", arg, 0, UINT64_MAX, &o->seed);
	case 'n':
		return parse_u64("--requests", arg, 1, 1000000000,
				 &o->requests);
	case 't':
		return parse_seconds("--seconds", arg, 86400, &o->seconds);
	case 'w':
		return parse_u64("--threads", arg, 1, MAX_THREADS,
				 &o->threads);
	case 'd':
		if (!*arg || strlen(arg) >= IFNAMSIZ)
			return usage_error("--dev '%s': a device name of 1 to "
					   "%d characters", arg, IFNAMSIZ - 1);
		o->dev = arg;
		return 0;
	}
	return 0;
}

static void outcome_list(unsigned int allowed, char *out, size_t size)
{
	out[0] = '\0';
	for (int o = 0; o < DCM_NOUTCOMES; o++) {
		size_t n = strlen(out);

		if (allowed & DCM_BIT(o))
			snprintf(out + n, size - n, "%s%s", n ? "|" : "",
				 dcm_outcome_name(o));
	}
}

/* ---- talking to dcbnl ---- */

/* The kernel's answer to one request. */
struct answer {
	int nl_err;		/* the netlink error's errno, 0 for the ack */
	bool acked;
	const struct nlmsghdr *reply;	/* in the worker's buffer, or NULL */
};

/* A u8 top-level attribute of a dcbnl reply, or -1. */
static int reply_u8(const struct nlmsghdr *h, uint16_t type)
{
	int len = (int)NLMSG_PAYLOAD(h, sizeof(struct dcbmsg));
	const struct nlattr *a = (const struct nlattr *)
		((const char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct dcbmsg)));

	for (; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	     a->nla_len <= len; len -= NLA_ALIGN(a->nla_len),
	     a = (const struct nlattr *)((const char *)a +
					 NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == type &&
		    a->nla_len == NLA_HDRLEN + 1)
			return *((const uint8_t *)a + NLA_HDRLEN);
	return -1;
}

/*
 * Send w->msg (its seq and NLM_F_ACK set here) and read the answer into
 * *a: 0, or an errno of the socket (ETIMEDOUT: none within 10 s).
 */
static int talk(struct worker *w, struct answer *a)
{
	struct nlmsghdr *h = (struct nlmsghdr *)w->msg.buf;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	static __thread union {
		char buf[REPLY_MAX];
		struct nlmsghdr align;
	} rx;

	memset(a, 0, sizeof(*a));
	h->nlmsg_flags |= NLM_F_ACK;
	h->nlmsg_seq = ++w->nl.seq;
	if (sendto(w->nl.fd, w->msg.buf, w->msg.len, 0,
		   (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return errno;
	for (;;) {
		ssize_t n = recv(w->nl.fd, rx.buf, sizeof(rx.buf), 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? ETIMEDOUT : errno;
		}
		for (struct nlmsghdr *p = &rx.align; NLMSG_OK(p, n);
		     p = NLMSG_NEXT(p, n)) {
			if (p->nlmsg_seq != h->nlmsg_seq)
				continue;
			if (p->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(p);

				a->nl_err = -e->error;
				a->acked = true;
				return 0;
			}
			if ((p->nlmsg_type == RTM_GETDCB ||
			     p->nlmsg_type == RTM_SETDCB) && !a->reply &&
			    p->nlmsg_len <= sizeof(w->reply)) {
				memcpy(w->reply, p, p->nlmsg_len);
				w->reply_len = p->nlmsg_len;
				a->reply = &w->align;
			}
		}
	}
}

/* What the answer to a request of command cmd is, as the model says it. */
static enum dcm_outcome outcome_of(const struct answer *a, uint8_t cmd)
{
	int v;

	if (a->nl_err)
		return dcm_nl_outcome(a->nl_err);
	if (!a->reply)
		return DCM_ACK_ONLY;
	switch (cmd) {
	case DCB_CMD_IEEE_SET:
	case DCB_CMD_IEEE_DEL:
		v = reply_u8(a->reply, DCB_ATTR_IEEE);
		return v < 0 ? DCM_OTHER : dcm_ieee_outcome((int8_t)v);
	case DCB_CMD_SDCBX:
		v = reply_u8(a->reply, DCB_ATTR_DCBX);
		return v == 0 ? DCM_OK : v == 1 ? DCM_DCBX_REFUSED : DCM_OTHER;
	case DCB_CMD_GDCBX:
	case DCB_CMD_IEEE_GET:
		/* the driver's mode: host DCBX, IEEE */
		v = reply_u8(a->reply, DCB_ATTR_DCBX);
		return v == (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE) ?
		       DCM_OK : DCM_OTHER;
	default:
		return DCM_OTHER;
	}
}

static uint8_t cmd_of(const struct dcm_msg *m)
{
	return m->len >= NLMSG_HDRLEN + sizeof(struct dcbmsg) ?
	       ((const struct dcbmsg *)(m->buf + NLMSG_HDRLEN))->cmd : 0;
}

/* A plain DCB_CMD_IEEE_GET of the device into w->msg. */
static void build_get(struct worker *w)
{
	struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = DCB_CMD_IEEE_GET };
	struct nlmsghdr *h = (struct nlmsghdr *)w->msg.buf;
	struct nlattr *a;
	size_t n = strlen(g.o.dev) + 1;

	memset(&w->msg, 0, sizeof(w->msg));
	h->nlmsg_type = RTM_GETDCB;
	h->nlmsg_flags = NLM_F_REQUEST;
	memcpy(NLMSG_DATA(h), &d, sizeof(d));
	w->msg.len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(d));
	a = (struct nlattr *)(w->msg.buf + w->msg.len);
	a->nla_type = DCB_ATTR_IFNAME;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((char *)a + NLA_HDRLEN, g.o.dev, n);
	w->msg.len += NLA_ALIGN(a->nla_len);
	h->nlmsg_len = (uint32_t)w->msg.len;
}

/* The IEEE part of a GET reply into o; false if it is not there. */
static bool parse_get(const struct nlmsghdr *h, struct dcm_obs *o)
{
	int len = (int)NLMSG_PAYLOAD(h, sizeof(struct dcbmsg));
	const struct nlattr *a = (const struct nlattr *)
		((const char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct dcbmsg)));
	bool ets = false, pfc = false;

#define NEXT(a, len)	((len) -= NLA_ALIGN((a)->nla_len),		\
			 (a) = (const struct nlattr *)((const char *)(a) + \
			 NLA_ALIGN((a)->nla_len)))
#define OK(a, len)	((len) >= NLA_HDRLEN && (a)->nla_len >= NLA_HDRLEN && \
			 (a)->nla_len <= (len))
	memset(o, 0, sizeof(*o));
	for (; OK(a, len); NEXT(a, len)) {
		const struct nlattr *i = (const struct nlattr *)
			((const char *)a + NLA_HDRLEN);
		int ilen = a->nla_len - NLA_HDRLEN;

		if ((a->nla_type & NLA_TYPE_MASK) != DCB_ATTR_IEEE)
			continue;
		for (; OK(i, ilen); NEXT(i, ilen)) {
			const void *p = (const char *)i + NLA_HDRLEN;
			size_t plen = i->nla_len - NLA_HDRLEN;
			const struct nlattr *e = p;
			int tlen = (int)plen;

			switch (i->nla_type & NLA_TYPE_MASK) {
			case DCB_ATTR_IEEE_ETS:
				if (plen != sizeof(o->ets))
					return false;
				memcpy(&o->ets, p, sizeof(o->ets));
				ets = true;
				break;
			case DCB_ATTR_IEEE_PFC:
				if (plen != sizeof(o->pfc))
					return false;
				memcpy(&o->pfc, p, sizeof(o->pfc));
				pfc = true;
				break;
			case DCB_ATTR_IEEE_APP_TABLE:
				for (; OK(e, tlen); NEXT(e, tlen)) {
					if (e->nla_len != NLA_HDRLEN +
					    sizeof(struct dcb_app) ||
					    o->napp == DCM_APP_MAX)
						return false;
					memcpy(&o->app[o->napp++],
					       (const char *)e + NLA_HDRLEN,
					       sizeof(struct dcb_app));
				}
				break;
			}
		}
	}
#undef NEXT
#undef OK
	return ets && pfc;
}

/* ---- the device's queues ---- */

/* ETHTOOL_GCHANNELS: 0 with combined and max set, or an errno. */
static int channels(uint8_t *combined, uint8_t *max)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", g.o.dev);
	ifr.ifr_data = (void *)&ch;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		err = errno;
	close(fd);
	*combined = (uint8_t)ch.combined_count;
	*max = (uint8_t)ch.max_combined;
	return err;
}

/* Each TX queue's traffic_class (-1: EINVAL) for queues < q; 0/errno. */
static int read_traffic_classes(uint8_t q, int *tc)
{
	for (unsigned int i = 0; i < q && i < DCM_NTC; i++) {
		char path[128], text[32];
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path),
			 "/sys/class/net/%s/queues/tx-%u/traffic_class",
			 g.o.dev, i);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		n = read(fd, text, sizeof(text) - 1);
		if (n < 0 && errno != EINVAL) {
			int err = errno;

			close(fd);
			return err;
		}
		close(fd);
		if (n < 0) {
			tc[i] = -1;
			continue;
		}
		text[n] = '\0';
		tc[i] = atoi(text);
	}
	return 0;
}

/*
 * Read the device back and check it against the model's states (called
 * with world_lock held; sysfs: also churn_lock, so nothing is in flight).
 */
static void check(struct worker *w, bool sysfs, const char *after)
{
	struct dcm_obs o;
	struct answer a;
	char why[200] = "";
	int err;

	w->checks++;
	build_get(w);
	err = talk(w, &a);
	if (!err && (a.nl_err || !a.reply || !parse_get(a.reply, &o)))
		err = a.nl_err ? a.nl_err : EBADMSG;
	if (!err && sysfs) {
		uint8_t max;

		o.have_sysfs = true;
		err = channels(&o.q, &max);
		if (!err)
			err = read_traffic_classes(o.q, o.traffic_class);
	}
	if (err) {
		w->check_errors++;
		fuzz_report_line("read-back after %s: %s (%s)", after, errname(err),
			    strerror(err));
		return;
	}
	if (!dcm_world_observe(&g.world, &o, why, sizeof(why))) {
		w->check_errors++;
		fuzz_report_line("read-back after %s: %s", after, why);
	}
}

/* ---- request threads ---- */

static enum dcm_category pick_category(struct cgm_rng *r)
{
	unsigned int total = 0, x;

	for (int c = 0; c < DCM_NCATS; c++)
		total += weights[c];
	x = (unsigned int)cgm_below(r, total);
	for (int c = 0; c < DCM_NCATS; c++) {
		if (x < weights[c])
			return (enum dcm_category)c;
		x -= weights[c];
	}
	return DCM_GET;
}

static void mismatch(struct worker *w, enum dcm_category c,
		     unsigned int allowed, enum dcm_outcome got,
		     const struct answer *a)
{
	char hex[200], want[200];

	w->mismatches++;
	/* the header's seq and flags are ours: the rest is the request */
	dcm_hex(w->msg.buf, w->msg.len, 96, hex, sizeof(hex));
	outcome_list(allowed, want, sizeof(want));
	fuzz_report_line("mismatch: %s request %s: expected %s, got %s%s%s",
		    dcm_category_name(c), hex, want, dcm_outcome_name(got),
		    a->nl_err && got == DCM_OTHER ? " " : "",
		    a->nl_err && got == DCM_OTHER ? errname(a->nl_err) : "");
	pthread_mutex_lock(&g.lock);
	if (g.nex < EXAMPLES) {
		struct example *e = &g.ex[g.nex++];

		*e = (struct example){ .cat = c, .allowed = allowed,
				       .got = got };
		snprintf(e->request, sizeof(e->request), "%s", hex);
	}
	pthread_mutex_unlock(&g.lock);
}

static void one_request(struct worker *w)
{
	enum dcm_category c = pick_category(&w->rng);
	bool changes;
	enum dcm_outcome got, alt;
	unsigned int allowed;
	struct answer a;
	int err;

	dcm_generate(&w->rng, c, &g.names, &w->msg);
	changes = dcm_changes_state(w->msg.buf, w->msg.len);
	if (changes)
		pthread_mutex_lock(&g.world_lock);
	err = talk(w, &a);
	got = err ? DCM_OTHER : outcome_of(&a, cmd_of(&w->msg));
	if (changes) {
		allowed = dcm_world_request(&g.world, &g.names, w->msg.buf,
					    w->msg.len, got);
		if (got == DCM_OK && dcm_carries_ets(w->msg.buf, w->msg.len))
			check(w, false, "an accepted ETS set");
		pthread_mutex_unlock(&g.world_lock);
	} else {
		struct dcm_dev d = g.clean;
		enum dcm_outcome o = dcm_eval(&d, &g.names, w->msg.buf,
					      w->msg.len, &alt);

		allowed = o == DCM_OTHER ? 0 : DCM_BIT(o);
	}
	if (err)
		fuzz_report_line("%s request: %s (%s)", dcm_category_name(c),
			    errname(err), strerror(err));
	w->count[c][got]++;
	if (!(allowed & DCM_BIT(got)))
		mismatch(w, c, allowed, got, &a);
	if (++w->since_check >= CHECK_EVERY) {
		w->since_check = 0;
		pthread_mutex_lock(&g.churn_lock);
		pthread_mutex_lock(&g.world_lock);
		check(w, true, "a pause in the churn");
		pthread_mutex_unlock(&g.world_lock);
		pthread_mutex_unlock(&g.churn_lock);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&g.stop) &&
	       atomic_fetch_add(&g.tickets, 1) < g.o.requests)
		one_request(w);
	atomic_fetch_add(&g.workers_done, 1);
	return NULL;
}

/* ---- churn ---- */

/*
 * Run ETHTOOL or TC with argv; the outcome by exit status and message.
 * 0, or an errno when it could not be run.
 */
static int run_tool(const char *path, char **args, enum dcm_churn_result *r,
		    char *text, size_t size)
{
	char *argv[64];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none;
	int pfd[2], status = 0, err, n = 0;
	size_t used = 0;
	pid_t pid;

	argv[n++] = (char *)path;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	err = posix_spawn(&pid, path, &fa, &attr, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(pfd[1]);
	if (err) {
		close(pfd[0]);
		return err;
	}
	for (;;) {
		ssize_t k = read(pfd[0], text + used, size - 1 - used);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		used += (size_t)k;
		if (used + 1 >= size)
			used = 0;	/* keep the end, where the error is */
	}
	text[used] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		*r = DCM_CR_OK;
	else if (strstr(text, "busy"))
		*r = DCM_CR_EBUSY;
	else if (strstr(text, "File exists") || strstr(text, "Exclusivity"))
		*r = DCM_CR_EEXIST;
	else if (strstr(text, "handle of zero") ||
		 strstr(text, "No such file"))
		*r = DCM_CR_ENOENT;
	else if (strstr(text, "Invalid argument") ||
		 strstr(text, "exceeds maximum"))
		*r = DCM_CR_EINVAL;
	else
		*r = DCM_CR_OTHER;
	return 0;
}

static int run_churn(const struct dcm_churn *op, enum dcm_churn_result *r,
		     char *text, size_t size)
{
	char buf[512], *args[48];

	if (dcm_churn_argv(op, g.o.dev, buf, sizeof(buf), args, 48) < 0)
		return E2BIG;
	return run_tool(op->kind == DCM_CH_ETHTOOL ? ETHTOOL : TC, args, r,
			text, size);
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *churner(void *arg)
{
	int who = (int)(intptr_t)arg;
	struct cgm_rng r;

	cgm_seed(&r, g.o.seed, 1000 + (uint64_t)who);
	while (!atomic_load(&g.stop)) {
		enum dcm_churn_kind k = DCM_CH_ETHTOOL;
		enum dcm_churn_result got = DCM_CR_OTHER;
		struct dcm_churn op;
		unsigned int allowed;
		char text[1024], want[96] = "", args[512], *argv[48];
		int err;

		/* a rest, so requests meet each layout for a while */
		sleep_ms(5 + (unsigned int)cgm_below(&r, 40));
		pthread_mutex_lock(&g.churn_lock);
		pthread_mutex_lock(&g.world_lock);
		if (who == CHURN_TC) {
			/* mostly the one that can work, now and then not */
			bool odd = !cgm_below(&r, 8);

			k = g.world.b[0].dev.mqprio != odd ? DCM_CH_TC_DEL :
			    DCM_CH_TC_ADD;
		}
		dcm_churn_generate(&r, k, dcm_world_queues(&g.world), &op);
		dcm_world_churn_begin(&g.world, &op);
		pthread_mutex_unlock(&g.world_lock);
		err = run_churn(&op, &got, text, sizeof(text));
		if (err)
			got = DCM_CR_OTHER;
		pthread_mutex_lock(&g.world_lock);
		allowed = dcm_world_churn_end(&g.world, got);
		pthread_mutex_unlock(&g.world_lock);
		/* the counts are the churn threads': under churn_lock */
		g.churn_count[k][got]++;
		if (err)
			g.churn_errors++;
		else if (!(allowed & (1u << got)))
			g.churn_mismatches++;
		pthread_mutex_unlock(&g.churn_lock);
		if (err) {
			fuzz_report_line("churn: %s: %s (%s)", dcm_churn_name(k),
				    errname(err), strerror(err));
			continue;
		}
		if (allowed & (1u << got))
			continue;
		for (int i = 0; i < DCM_CR_NRESULTS; i++)
			if (allowed & (1u << i))
				snprintf(want + strlen(want),
					 sizeof(want) - strlen(want), "%s%s",
					 want[0] ? "|" : "",
					 dcm_churn_result_name(i));
		dcm_churn_argv(&op, g.o.dev, args, sizeof(args), argv, 48);
		fuzz_report_line("churn mismatch: %s %s ... %s: expected %s, got "
			    "%s: %.*s", op.kind == DCM_CH_ETHTOOL ? "ethtool" :
			    "tc", argv[0], argv[3] ? argv[3] : "", want,
			    dcm_churn_result_name(got),
			    (int)strcspn(text, "\n"), text);
	}
	return NULL;
}

/* ---- setup and restore ---- */

/* One IEEE set of the device from worker 0's socket: 0 or an errno. */
static int ieee_set_raw(struct worker *w, uint8_t cmd, uint16_t type,
			const void *data, size_t len)
{
	struct nlmsghdr *h = (struct nlmsghdr *)w->msg.buf;
	struct answer a;
	struct nlattr *ieee, *at, *table = NULL;
	int err, v;

	build_get(w);
	((struct dcbmsg *)NLMSG_DATA(h))->cmd = cmd;
	h->nlmsg_type = RTM_SETDCB;
	ieee = (struct nlattr *)(w->msg.buf + w->msg.len);
	ieee->nla_type = DCB_ATTR_IEEE;
	w->msg.len += NLA_HDRLEN;
	if (type == DCB_ATTR_IEEE_APP_TABLE) {
		table = (struct nlattr *)(w->msg.buf + w->msg.len);
		table->nla_type = DCB_ATTR_IEEE_APP_TABLE;
		w->msg.len += NLA_HDRLEN;
		type = DCB_ATTR_IEEE_APP;
	}
	at = (struct nlattr *)(w->msg.buf + w->msg.len);
	at->nla_type = type;
	at->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)at + NLA_HDRLEN, data, len);
	w->msg.len += NLA_ALIGN(at->nla_len);
	if (table)
		table->nla_len = (uint16_t)(w->msg.buf + w->msg.len -
					    (uint8_t *)table);
	ieee->nla_len = (uint16_t)(w->msg.buf + w->msg.len - (uint8_t *)ieee);
	h->nlmsg_len = (uint32_t)w->msg.len;
	err = talk(w, &a);
	if (err)
		return err;
	if (a.nl_err)
		return a.nl_err;
	v = a.reply ? reply_u8(a.reply, DCB_ATTR_IEEE) : -1;
	return v < 0 ? EBADMSG : -(int8_t)v;
}

/* ETS (every priority in TC 0, strict), PFC off, no APP entries. */
static int dcb_defaults(struct worker *w)
{
	struct ieee_ets ets = { 0 };
	struct ieee_pfc pfc = { 0 };
	struct dcm_obs o;
	struct answer a;
	int err;

	err = ieee_set_raw(w, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS, &ets,
			   sizeof(ets));
	if (!err)
		err = ieee_set_raw(w, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_PFC, &pfc,
				   sizeof(pfc));
	if (err)
		return err;
	build_get(w);
	err = talk(w, &a);
	if (!err && (a.nl_err || !a.reply || !parse_get(a.reply, &o)))
		err = a.nl_err ? a.nl_err : EBADMSG;
	for (int i = 0; !err && i < o.napp; i++)
		err = ieee_set_raw(w, DCB_CMD_IEEE_DEL, DCB_ATTR_IEEE_APP_TABLE,
				   &o.app[i], sizeof(o.app[i]));
	return err;
}

/* Does the device have a root qdisc of kind (mqprio, taprio)? */
static bool root_qdisc_is(const char *kind)
{
	char *args[] = { "qdisc", "show", "dev", (char *)g.o.dev, "root",
			 NULL };
	char text[1024];
	enum dcm_churn_result r;

	return !run_tool(TC, args, &r, text, sizeof(text)) &&
	       strstr(text, kind) != NULL;
}

static int ethtool_l(uint8_t n)
{
	struct dcm_churn op = { .kind = DCM_CH_ETHTOOL, .n = n };
	enum dcm_churn_result r;
	char text[1024];
	int err = run_churn(&op, &r, text, sizeof(text));

	if (err)
		return err;
	return r == DCM_CR_OK ? 0 : r == DCM_CR_EBUSY ? EBUSY : EINVAL;
}

static int setup(void)
{
	struct worker *w = &g.w[0];
	struct ieee_ets ets = { .prio_tc = { 0, 0, 0, 0, 0, 0, 0, 1 } };
	uint8_t q;
	int err;

	if (!if_nametoindex(g.o.dev))
		return runtime_error("%s: no such device (--dev NAME)",
				     g.o.dev);
	err = channels(&g.start_q, &g.maxq);
	if (err)
		return runtime_error("%s: ETHTOOL_GCHANNELS: %s", g.o.dev,
				     strerror(err));
	if (root_qdisc_is("mqprio") || root_qdisc_is("taprio"))
		return runtime_error("%s has an mqprio or taprio root qdisc, "
				     "whose layout dcbfuzz cannot know: delete "
				     "it ('tc qdisc del dev %s root') and run "
				     "again", g.o.dev, g.o.dev);
	for (unsigned int i = 0; i < g.o.threads; i++) {
		err = rtnl_open(&g.w[i].nl);
		if (err)
			return runtime_error("rtnetlink socket: %s",
					     strerror(err));
		struct timeval tv = { .tv_sec = 10 };

		setsockopt(g.w[i].nl.fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			   sizeof(tv));
		g.w[i].idx = (int)i;
		cgm_seed(&g.w[i].rng, g.o.seed, i);
	}
	/*
	 * A known layout: set and drop a driver partition, whose drop
	 * (netdev_reset_tc()) clears every class entry, stale ones too.
	 */
	g.touched = true;
	q = g.start_q;
	if (g.maxq >= 2 && q < 2) {
		err = ethtool_l(g.maxq);
		if (err)
			return runtime_error("%s: ethtool -L combined %u: %s",
					     g.o.dev, g.maxq, strerror(err));
		q = g.maxq;
	}
	if (q >= 2) {
		err = ieee_set_raw(w, DCB_CMD_IEEE_SET, DCB_ATTR_IEEE_ETS,
				   &ets, sizeof(ets));
		if (err)
			return runtime_error("%s: an ETS map of 2 classes: %s "
					     "(%s): is another layout in "
					     "effect?", g.o.dev, errname(err),
					     strerror(err));
	}
	err = dcb_defaults(w);
	if (err)
		return runtime_error("%s: DCB to the driver's defaults: %s (%s)",
				     g.o.dev, errname(err), strerror(err));
	dcm_dev_init(&g.clean, q, g.maxq);
	dcm_world_init(&g.world, &g.clean);
	check(w, true, "setting the device up");
	if (w->check_errors)
		return runtime_error("%s: not in the state it was put in; "
				     "is lldpad running on it?", g.o.dev);
	w->checks = 0;
	return 0;
}

/* The device as found; g.restored says whether it is. */
static void restore(void)
{
	struct worker *w = &g.w[0];
	uint8_t q = 0, max;
	int err;

	g.restored = false;
	if (!g.touched)
		return;
	if (w->nl.fd < 0 && rtnl_open(&w->nl)) {
		snprintf(g.restore_why, sizeof(g.restore_why),
			 "no rtnetlink socket");
		return;
	}
	if (root_qdisc_is("mqprio")) {
		char *args[] = { "qdisc", "del", "dev", (char *)g.o.dev,
				 "root", NULL };
		enum dcm_churn_result r;
		char text[1024];

		if (run_tool(TC, args, &r, text, sizeof(text)) ||
		    r != DCM_CR_OK)
			fuzz_report_line("restore: tc qdisc del dev %s root: %s",
				    g.o.dev, text);
	}
	err = dcb_defaults(w);
	if (err)
		fuzz_report_line("restore: DCB defaults: %s", errname(err));
	if (!channels(&q, &max) && q != g.start_q && ethtool_l(g.start_q))
		fuzz_report_line("restore: ethtool -L %s combined %u failed",
			    g.o.dev, g.start_q);
	/* what is there now */
	if (root_qdisc_is("mqprio")) {
		snprintf(g.restore_why, sizeof(g.restore_why),
			 "an mqprio root qdisc is left");
	} else if (channels(&q, &max) || q != g.start_q) {
		snprintf(g.restore_why, sizeof(g.restore_why),
			 "%u queue pairs, not %u", q, g.start_q);
	} else {
		struct dcm_obs o;
		struct answer a;
		struct dcm_dev d;

		build_get(w);
		err = talk(w, &a);
		dcm_dev_init(&d, q, max);
		if (err || a.nl_err || !a.reply || !parse_get(a.reply, &o) ||
		    !dcm_obs_matches(&d, &o, g.restore_why,
				     sizeof(g.restore_why)))
			snprintf(g.restore_why + strlen(g.restore_why),
				 sizeof(g.restore_why) -
				 strlen(g.restore_why), " (DCB not at the "
				 "driver's defaults)");
		else
			g.restored = true;
	}
	if (!g.restored)
		fuzz_report_line("restore: %s", g.restore_why);
}

static int start_threads(void)
{
	int err = 0;

	for (unsigned int i = 0; i < g.o.threads && !err; i++)
		err = fuzz_thread_start(&g.w[i].th, worker_main, &g.w[i]);
	for (int i = 0; i < NCHURNERS && !err; i++)
		if (g.o.churn[i] && g.maxq >= 2)
			err = fuzz_thread_start(&g.churner[i], churner,
						(void *)(intptr_t)i);
	return err;
}

static void stop_threads(void)
{
	atomic_store(&g.stop, true);
	for (unsigned int i = 0; i < g.o.threads; i++)
		fuzz_thread_join(&g.w[i].th);
	for (int i = 0; i < NCHURNERS; i++)
		fuzz_thread_join(&g.churner[i]);
}

/* ---- the report ---- */

static void print_counts(const char *key, const uint64_t *count, int n,
			 const char *(*name)(int))
{
	open_json_object(key);
	for (int o = 0; o < n; o++) {
		char fmt[40];

		if (!count[o])
			continue;
		snprintf(fmt, sizeof(fmt), " %s %%llu", name(o));
		print_uint(PRINT_ANY, name(o), fmt, count[o]);
	}
	close_json_object();
}

static const char *outcome_name_i(int o)
{
	return dcm_outcome_name((enum dcm_outcome)o);
}

static const char *churn_result_name_i(int r)
{
	return dcm_churn_result_name((enum dcm_churn_result)r);
}

static void print_examples(void)
{
	open_json_array("mismatch_examples");
	for (int i = 0; i < g.nex; i++) {
		const struct example *e = &g.ex[i];

		open_json_object(NULL);
		print_string(PRINT_JSON, "category", NULL,
			     dcm_category_name(e->cat));
		print_string(PRINT_JSON, "request", NULL, e->request);
		open_json_array("expected");
		for (int o = 0; o < DCM_NOUTCOMES; o++)
			if (e->allowed & DCM_BIT(o))
				print_string(PRINT_JSON, NULL, NULL,
					     dcm_outcome_name(o));
		close_json_array();
		print_string(PRINT_JSON, "got", NULL, dcm_outcome_name(e->got));
		close_json_object();
	}
	close_json_array();
}

static uint64_t report(enum fuzz_stop why, double elapsed)
{
	static uint64_t sum[DCM_NCATS][DCM_NOUTCOMES], total[DCM_NOUTCOMES];
	uint64_t requests = 0, mism = 0, checks = 0, check_err = 0;

	for (unsigned int i = 0; i < g.o.threads; i++) {
		const struct worker *w = &g.w[i];

		for (int c = 0; c < DCM_NCATS; c++)
			for (int o = 0; o < DCM_NOUTCOMES; o++) {
				sum[c][o] += w->count[c][o];
				total[o] += w->count[c][o];
				requests += w->count[c][o];
			}
		mism += w->mismatches;
		checks += w->checks;
		check_err += w->check_errors;
	}
	new_json_obj(stdout, g.o.cli.json);
	print_uint(PRINT_ANY, "seed", "dcbfuzz: seed %llu", g.o.seed);
	print_string(PRINT_ANY, "dev", ", %s", g.o.dev);
	print_uint(PRINT_ANY, "threads", ", %llu threads", g.o.threads);
	print_uint(PRINT_ANY, "requests", ": %llu requests", requests);
	print_uint(PRINT_JSON, "target_requests", NULL, g.o.requests);
	print_float(PRINT_ANY, "seconds", " in %.1f s", elapsed);
	print_float(PRINT_ANY, "requests_per_s", " (%.0f/s)",
		    elapsed > 0 ? requests / elapsed : 0);
	print_string(PRINT_ANY, "stopped", ", stopped by %s\n",
		     fuzz_stop_name(why, "requests"));
	print_uint(PRINT_ANY, "mismatches", "mismatches %llu", mism);
	print_uint(PRINT_ANY, "checks", ", read-backs %llu", checks);
	print_uint(PRINT_ANY, "check_errors", " (%llu wrong)", check_err);
	print_uint(PRINT_ANY, "states_max", ", model states at most %llu",
		   (unsigned long long)g.world.max_n);
	print_uint(PRINT_JSON, "start_queues", NULL, g.start_q);
	print_uint(PRINT_JSON, "max_queues", NULL, g.maxq);
	print_string(PRINT_ANY, "restored", ", restored %s\n",
		     g.restored ? "yes" : "no");
	if (!g.restored)
		print_string(PRINT_JSON, "restore_problem", NULL,
			     g.restore_why);
	open_json_object("outcomes");
	for (int c = 0; c < DCM_NCATS; c++) {
		print_text("%-10s", dcm_category_name(c));
		print_counts(dcm_category_name(c), sum[c], DCM_NOUTCOMES,
			     outcome_name_i);
		print_text("\n");
	}
	close_json_object();
	print_text("%-10s", "all");
	print_counts("outcome_totals", total, DCM_NOUTCOMES, outcome_name_i);
	print_text("\n");
	open_json_object("churn");
	for (int k = 0; k < DCM_CH_NKINDS; k++) {
		print_text("churn %-7s", dcm_churn_name(k));
		print_counts(dcm_churn_name(k), g.churn_count[k],
			     DCM_CR_NRESULTS, churn_result_name_i);
		print_text("\n");
	}
	print_uint(PRINT_ANY, "mismatches", "churn mismatches %llu",
		   g.churn_mismatches);
	print_uint(PRINT_ANY, "errors", ", errors %llu\n", g.churn_errors);
	close_json_object();
	print_examples();
	delete_json_obj();
	return mism + check_err + g.churn_mismatches + g.churn_errors +
	       !g.restored;
}

int main(int argc, char **argv)
{
	enum fuzz_stop why = FUZZ_STOP_DONE;
	double t0 = 0, t1 = 0;
	int err, sig = 0;

	progname = "dcbfuzz";
	g.o = (struct opts){
		.cli = { .shortopts = ":s:n:t:w:d:c:jh", .longopts = longopts,
			 .usage = usage, .set = set_option, .ctx = &g.o },
		.requests = 100000, .threads = 2, .seconds = 600,
		.churn = { true, true }, .dev = "eth0",
	};
	for (int i = 0; i < MAX_THREADS; i++)
		g.w[i].nl.fd = -1;
	err = parse_options(argc, argv, &g.o.cli);
	if (err)
		return err;
	g.names = (struct dcm_names){ .dev = g.o.dev, .nodcb = "lo",
				      .unknown = "dcbfz-u" };
	fuzz_begin(g.o.seed_set, &g.o.seed);
	err = setup();
	if (!err) {
		t0 = now();
		err = start_threads();
	}
	if (!err)
		why = fuzz_wait(t0, g.o.seconds, &g.workers_done,
				(int)g.o.threads, &sig);
	atomic_store(&g.stop, true);
	t1 = now();
	stop_threads();
	restore();
	for (unsigned int i = 0; i < g.o.threads; i++)
		rtnl_close(&g.w[i].nl);
	if (err)
		return err;
	if (report(why, t1 - t0))
		return EXIT_FAILURE;
	if (why == FUZZ_STOP_SIGNAL)
		return runtime_error("stopped by %s after restoring %s",
				     strsignal(sig), g.o.dev);
	return 0;
}
