// SPDX-License-Identifier: GPL-2.0
/*
 * cgfuzz - fuzz net_prio.ifpriomap and net_cls.classid writes while
 * cgroups, devices and tasks change underneath, and check every answer.
 *
 * Writer threads each make single write(2)s of generated inputs (valid,
 * malformed, overlong, out of range, unknown devices, devices being added
 * and deleted, cgroups being made and removed: cgmodel.h) and compare the
 * errno with what Linux 6.1's code gives for that input (cgmodel.c's
 * model); a result the model does not allow is a mismatch.  Each writer
 * owns a cgroup in each hierarchy and reads back, after its writes, that
 * the ifpriomap of its cgroup holds what it wrote on the stable devices
 * and net_cls.classid the classid as 6.1 stores it (32 bits).
 *
 * Meanwhile three threads churn: one makes and removes cgroups (and child
 * cgroups) in both hierarchies, one adds and deletes dummy devices and
 * VLANs on them over rtnetlink, one moves the writer threads (tasks) and
 * forked children holding sockets (cgroup.procs) between cgroups.
 *
 * Everything it makes is named cgfuzz-PID (cgroups) or cgfz-* (devices),
 * and removed on every way out, SIGINT, SIGTERM and SIGHUP included (the
 * signals are taken by the main thread; the run stops, cleans up, reports).
 * It refuses to start if one of its device names exists.
 *
 * Exit 0 when every write matched the model, every read-back agreed, the
 * churn met no unexpected error and nothing was left behind; 1 otherwise
 * (or when interrupted by a signal, or on a runtime error); 2 on usage.
 */
#define _GNU_SOURCE		/* gettid */
#include "cgmodel.h"
#include "fuzzrun.h"
#include "rtnl.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WRITERS	32
#define NSLOTS		6	/* transient cgroups t<k>, t<k>/c */
#define NTARGETS	(2 * NSLOTS)	/* t<k> and t<k>/c */
#define NCHILDREN	3
#define NHIER		2	/* net_prio, net_cls: one per cgm_file */
#define EXAMPLES	10	/* mismatches kept for the JSON */
#define ROOT_MAX	256	/* --prio-root, --cls-root */

/* Devices: stable ones exist all run; churn ones come and go. */
#define NSTABLE		3
#define NCHURN_DUMMY	4
static const char *const stable_devs[NSTABLE] = {
	"cgfz-s0", "cgfz-s1", "cgfz-sv",	/* cgfz-sv: VLAN 7 on s1 */
};
static const char *const churn_devs[2 * NCHURN_DUMMY] = {
	"cgfz-d0", "cgfz-d1", "cgfz-d2", "cgfz-d3",	/* dummies */
	"cgfz-v0", "cgfz-v1", "cgfz-v2", "cgfz-v3",	/* VLAN k on d<k> */
};
static const struct cgm_names names = {
	.stable = stable_devs, .nstable = NSTABLE,
	.churn = churn_devs, .nchurn = 2 * NCHURN_DUMMY,
	.unknown_prefix = "cgfz-u",
};

/* How often each category is drawn, per file (0: not for that file). */
static const unsigned int weights[CGM_NFILES][CGM_NCATS] = {
	[CGM_PRIOMAP] = { [CGM_VALID] = 24, [CGM_MALFORMED] = 28,
			  [CGM_OVERLONG] = 8, [CGM_RANGE] = 10,
			  [CGM_UNKNOWN_DEV] = 8, [CGM_GONE_DEV] = 14,
			  [CGM_GONE_CGROUP] = 8 },
	[CGM_CLASSID] = { [CGM_VALID] = 30, [CGM_MALFORMED] = 36,
			  [CGM_OVERLONG] = 8, [CGM_RANGE] = 16,
			  [CGM_GONE_CGROUP] = 10 },
};

/* The churn threads, by --churn name. */
enum { CHURN_CGROUPS, CHURN_LINKS, CHURN_MOVES, NCHURNERS };
static const char *const churner_name[NCHURNERS] = { "cgroups", "links",
						     "moves" };

struct opts {
	struct cli cli;
	uint64_t seed, writes, writers;
	bool seed_set;
	bool churn[NCHURNERS];
	double seconds;
	const char *root[NHIER];	/* the hierarchies' mount points */
};

/* A writer and what it owns: one cgroup per hierarchy, w<idx>. */
struct writer {
	int idx;
	struct fuzz_thread th;
	atomic_int tid;
	atomic_bool done;
	/*
	 * rng draws the inputs and their targets only, so that a seed gives
	 * each writer the same inputs whatever the kernel answers; aux draws
	 * what depends on answers (reusing an fd, checking a refusal).
	 */
	struct cgm_rng rng, aux;
	int wfd[NHIER], rfd[NHIER];	/* its own cgroup's files */
	int tfd[NHIER][NTARGETS];	/* transient files kept open, or -1 */
	uint32_t prio[NSTABLE];		/* its map of stable devices */
	uint32_t classid;
	uint64_t count[CGM_NFILES][CGM_NCATS][CGM_NOUTCOMES];
	uint64_t readbacks, readback_errors, mismatches;
	char buf[CGM_INPUT_MAX];
	char text[65536];		/* an ifpriomap read back */
};

struct churn {
	atomic_ullong cgroups_made, cgroups_removed, rmdir_busy;
	atomic_ullong links_added, links_deleted;
	atomic_ullong moves, moves_refused, errors;
};

struct example {
	enum cgm_file file;
	enum cgm_category cat;
	bool transient;
	unsigned int allowed;
	enum cgm_outcome got;
	char input[160];
};

static struct {
	struct opts o;
	long page;
	char top[NHIER][ROOT_MAX + 32];	/* ROOT/cgfuzz-PID */
	bool top_made[NHIER];
	bool own_names;			/* our device names were free */
	bool stable_made[NSTABLE];
	char present[64][IFNAMSIZ];	/* others at start (lo, eth0) */
	int npresent;
	struct writer w[MAX_WRITERS];
	pid_t child[NCHILDREN];
	struct fuzz_thread churner[NCHURNERS];
	struct rtnl rtnl;		/* setup, link churn, cleanup */
	atomic_ullong tickets;
	atomic_int writers_done;
	atomic_bool stop;
	struct churn churn;
	pthread_mutex_t lock;		/* examples, stderr lines */
	struct example ex[EXAMPLES];
	int nex;
	int leftovers;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *const hier_name[NHIER] = { "net_prio", "net_cls" };

static void usage(void)
{
	printf(
"usage: cgfuzz [OPTIONS]\n"
"Fuzz net_prio.ifpriomap and net_cls.classid writes against a model of\n"
"Linux 6.1 while cgroups, dummy/VLAN devices and tasks churn.\n"
"  -s, --seed N            seed of the inputs (default: from the clock;\n"
"                          printed, so a run's inputs can be replayed)\n"
"  -n, --writes N          writes in all, 1..10^9 (default 100000)\n"
"  -t, --seconds S         stop after S seconds even if short of --writes\n"
"                          (default 600)\n"
"  -w, --writers N         writer threads, 1..%d (default 4)\n"
"  -c, --churn LIST        what changes meanwhile, a comma list of cgroups\n"
"                          (make/remove), links (add/delete dummy, VLAN),\n"
"                          moves (tasks between cgroups); or none\n"
"                          (default cgroups,links,moves)\n"
"      --prio-root PATH    net_prio hierarchy\n"
"                          (default /sys/fs/cgroup/net_prio)\n"
"      --cls-root PATH     net_cls hierarchy\n"
"                          (default /sys/fs/cgroup/net_cls)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"Makes cgroups cgfuzz-PID under both roots and devices cgfz-*; removes\n"
"them on exit.  Exit 0 clean, 1 mismatches/errors/leftovers/signal, 2 usage.\n",
		MAX_WRITERS);
}

static const struct option longopts[] = {
	OPTION_ARG("seed", 's'), OPTION_ARG("writes", 'n'),
	OPTION_ARG("seconds", 't'), OPTION_ARG("writers", 'w'),
	OPTION_ARG("churn", 'c'),
	OPTION_ARG("prio-root", 'P'), OPTION_ARG("cls-root", 'C'),
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
		return parse_u64("--writes", arg, 1, 1000000000, &o->writes);
	case 't':
		return parse_seconds("--seconds", arg, 86400, &o->seconds);
	case 'w':
		return parse_u64("--writers", arg, 1, MAX_WRITERS, &o->writers);
	case 'P':
	case 'C':
		if (strlen(arg) >= ROOT_MAX)
			return usage_error("%s '%.20s...' is longer than %d "
					   "bytes", c == 'P' ? "--prio-root" :
					   "--cls-root", arg, ROOT_MAX - 1);
		o->root[c == 'P' ? CGM_PRIOMAP : CGM_CLASSID] = arg;
		return 0;
	}
	return 0;
}

static void churn_error(const char *what, const char *name, int err)
{
	atomic_fetch_add(&g.churn.errors, 1);
	fuzz_report_line("churn: %s %s: %s (%s)", what, name, errname(err),
		    strerror(err));
}

/* ---- paths ---- */

/* ROOT/cgfuzz-PID/w<i> or /t<k>[/c]; sub NULL: the top itself. */
static void cg_path(char *out, size_t size, int h, const char *sub)
{
	if (sub)
		snprintf(out, size, "%s/%s", g.top[h], sub);
	else
		snprintf(out, size, "%s", g.top[h]);
}

static void target_name(char *out, size_t size, int t)
{
	if (t < NSLOTS)
		snprintf(out, size, "t%d", t);
	else
		snprintf(out, size, "t%d/c", t - NSLOTS);
}

static void file_path(char *out, size_t size, int h, const char *sub,
		      const char *file)
{
	if (sub)
		snprintf(out, size, "%s/%s/%s", g.top[h], sub, file);
	else
		snprintf(out, size, "%s/%s", g.top[h], file);
}

/* ---- the device oracle ---- */

static int index_of(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return i;
	return -1;
}

static enum cgm_dev_state dev_state(const char *name)
{
	if (index_of(name, stable_devs, NSTABLE) >= 0)
		return CGM_DEV_PRESENT;
	if (index_of(name, churn_devs, 2 * NCHURN_DUMMY) >= 0)
		return CGM_DEV_RACING;
	for (int i = 0; i < g.npresent; i++)
		if (!strcmp(name, g.present[i]))
			return CGM_DEV_PRESENT;
	return CGM_DEV_ABSENT;
}

/* ---- writers ---- */

static enum cgm_category pick_category(struct cgm_rng *r, enum cgm_file f)
{
	unsigned int total = 0, x;

	for (int c = 0; c < CGM_NCATS; c++)
		total += weights[f][c];
	x = (unsigned int)cgm_below(r, total);
	for (int c = 0; c < CGM_NCATS; c++) {
		if (x < weights[f][c])
			return (enum cgm_category)c;
		x -= weights[f][c];
	}
	return CGM_VALID;
}

static void mismatch(struct writer *w, enum cgm_file f, enum cgm_category c,
		     bool transient, unsigned int allowed,
		     enum cgm_outcome got, const char *buf, size_t len,
		     int err)
{
	char input[160], want[96] = "";

	w->mismatches++;
	cgm_escape(buf, len, 100, input, sizeof(input));
	for (int o = 0; o < CGM_NOUTCOMES; o++) {
		size_t n = strlen(want);

		if (allowed & CGM_BIT(o))
			snprintf(want + n, sizeof(want) - n, "%s%s",
				 n ? "|" : "", cgm_outcome_name(o));
	}
	fuzz_report_line("mismatch: %s of %s cgroup, %s input \"%s\": expected "
		    "%s, got %s%s%s", cgm_file_name(f),
		    transient ? "a transient" : "its own",
		    cgm_category_name(c), input, want, cgm_outcome_name(got),
		    got == CGM_OTHER ? " " : "",
		    got == CGM_OTHER ? errname(err) : "");
	pthread_mutex_lock(&g.lock);
	if (g.nex < EXAMPLES) {
		struct example *e = &g.ex[g.nex++];

		*e = (struct example){ .file = f, .cat = c,
				       .transient = transient,
				       .allowed = allowed, .got = got };
		snprintf(e->input, sizeof(e->input), "%s", input);
	}
	pthread_mutex_unlock(&g.lock);
}

/* The whole of a cgroup file from offset 0; its length, or -errno. */
static ssize_t read_all(int fd, char *buf, size_t size)
{
	size_t off = 0;

	while (off + 1 < size) {
		ssize_t n = pread(fd, buf + off, size - 1 - off, (off_t)off);

		if (n < 0)
			return -errno;
		if (!n)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	return (ssize_t)off;
}

/* Does w's cgroup hold what w wrote?  One file; counts disagreements. */
static void read_back(struct writer *w, enum cgm_file f, const char *buf,
		      size_t len)
{
	char input[160];
	ssize_t n = read_all(w->rfd[f], w->text, sizeof(w->text));

	w->readbacks++;
	cgm_escape(buf, len, 60, input, sizeof(input));
	if (n < 0) {
		w->readback_errors++;
		fuzz_report_line("read-back: w%d %s: %s", w->idx, cgm_file_name(f),
			    errname((int)-n));
		return;
	}
	if (f == CGM_CLASSID) {
		unsigned long long v;
		char *end;

		v = strtoull(w->text, &end, 10);
		if (end == w->text || strcmp(end, "\n") || v != w->classid) {
			w->readback_errors++;
			fuzz_report_line("read-back: w%d net_cls.classid reads "
				    "\"%.30s\", expected %u after \"%s\"",
				    w->idx, w->text, w->classid, input);
		}
		return;
	}
	for (int i = 0; i < NSTABLE; i++) {
		char want[64];
		const char *line;
		size_t nl = strlen(stable_devs[i]);

		/* One "name prio" line per device: find ours. */
		snprintf(want, sizeof(want), "%s %u\n", stable_devs[i],
			 w->prio[i]);
		for (line = w->text; line; ) {
			if (!strncmp(line, stable_devs[i], nl) &&
			    line[nl] == ' ')
				break;
			line = strchr(line, '\n');
			line = line ? line + 1 : NULL;
		}
		if (!line || strncmp(line, want, strlen(want))) {
			w->readback_errors++;
			fuzz_report_line("read-back: w%d ifpriomap has \"%.*s\", "
				    "expected \"%s %u\" after \"%s\"", w->idx,
				    line ? (int)strcspn(line, "\n") : 9,
				    line ? line : "(no line)", stable_devs[i],
				    w->prio[i], input);
		}
	}
}

/* The fd of transient target t's file: kept from before, or opened. */
static int transient_fd(struct writer *w, enum cgm_file f, int t, int *err)
{
	static const char *const file[NHIER] = { "net_prio.ifpriomap",
						 "net_cls.classid" };
	char sub[16], path[PATH_MAX];
	int fd = w->tfd[f][t];

	*err = 0;
	/* Half the time the file opened earlier: its cgroup may be gone. */
	if (fd >= 0 && cgm_below(&w->aux, 2))
		return fd;
	if (fd >= 0)
		close(fd);
	w->tfd[f][t] = -1;
	target_name(sub, sizeof(sub), t);
	file_path(path, sizeof(path), f, sub, file[f]);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		*err = errno;
	else
		w->tfd[f][t] = fd;
	return fd;
}

static void one_write(struct writer *w)
{
	enum cgm_file f = (enum cgm_file)cgm_below(&w->rng, CGM_NFILES);
	enum cgm_category c = pick_category(&w->rng, f);
	bool transient = c == CGM_GONE_CGROUP;
	enum cgm_dev_state dev = CGM_DEV_ABSENT;
	struct cgm_parse p;
	enum cgm_outcome got;
	unsigned int allowed;
	int t = 0, fd, err = 0;
	size_t len;
	ssize_t n;

	/* A device of the lab's own (lo, eth0) is read, never written. */
	do {
		dev = CGM_DEV_ABSENT;
		len = cgm_generate(&w->rng, f, c, &names, (size_t)g.page,
				   w->buf);
		cgm_parse(f, w->buf, len, (size_t)g.page, &p);
		if (f == CGM_PRIOMAP && p.err == CGM_OK && !p.empty)
			dev = dev_state(p.dev);
	} while (dev == CGM_DEV_PRESENT &&
		 index_of(p.dev, stable_devs, NSTABLE) < 0);
	allowed = cgm_allowed(f, &p, dev, transient);
	if (transient) {
		t = (int)cgm_below(&w->rng, NTARGETS);
		fd = transient_fd(w, f, t, &err);
	} else {
		fd = w->wfd[f];
	}
	if (fd >= 0) {
		n = write(fd, w->buf, len);
		err = n < 0 ? errno : 0;
		got = n < 0 ? cgm_outcome_of(err) :
		      (size_t)n == len ? CGM_OK : CGM_SHORT;
	} else {
		got = cgm_outcome_of(err);
	}
	if (transient && got == CGM_ENODEV && w->tfd[f][t] >= 0) {
		close(w->tfd[f][t]);
		w->tfd[f][t] = -1;
	}
	w->count[f][c][got]++;
	if (!(allowed & CGM_BIT(got)))
		mismatch(w, f, c, transient, allowed, got, w->buf, len, err);
	if (transient)
		return;
	/* What the kernel took changes what w expects to read back. */
	if (got == CGM_OK && !p.empty && p.err == CGM_OK) {
		int i = f == CGM_PRIOMAP ?
			index_of(p.dev, stable_devs, NSTABLE) : -1;

		if (f == CGM_CLASSID)
			w->classid = p.value;
		else if (i >= 0)
			w->prio[i] = p.value;
		if (f == CGM_CLASSID || i >= 0) {
			read_back(w, f, w->buf, len);
			return;
		}
	}
	/* A refused write must have changed nothing: checked now and then. */
	if (!cgm_below(&w->aux, 8))
		read_back(w, f, w->buf, len);
}

/* w's starting values: its cgroups inherit them from the top. */
static int initial_values(struct writer *w)
{
	ssize_t n = read_all(w->rfd[CGM_CLASSID], w->text, sizeof(w->text));

	if (n < 0)
		return runtime_error("w%d: reading net_cls.classid: %s",
				     w->idx, strerror((int)-n));
	w->classid = (uint32_t)strtoul(w->text, NULL, 10);
	n = read_all(w->rfd[CGM_PRIOMAP], w->text, sizeof(w->text));
	if (n < 0)
		return runtime_error("w%d: reading net_prio.ifpriomap: %s",
				     w->idx, strerror((int)-n));
	for (char *line = strtok(w->text, "\n"); line;
	     line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');
		int i;

		if (!sp)
			continue;
		*sp = '\0';
		i = index_of(line, stable_devs, NSTABLE);
		if (i >= 0)
			w->prio[i] = (uint32_t)strtoul(sp + 1, NULL, 10);
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	atomic_store(&w->tid, gettid());
	while (!atomic_load(&g.stop) &&
	       atomic_fetch_add(&g.tickets, 1) < g.o.writes)
		one_write(w);
	for (int h = 0; h < NHIER; h++)
		for (int t = 0; t < NTARGETS; t++)
			if (w->tfd[h][t] >= 0)
				close(w->tfd[h][t]);
	atomic_store(&w->done, true);
	atomic_fetch_add(&g.writers_done, 1);
	return NULL;
}

/* ---- churn ---- */

static void *cgroup_churn(void *arg)
{
	bool made[NHIER][NTARGETS] = { { false } };
	struct cgm_rng r;

	cgm_seed(&r, g.o.seed, 1000);
	(void)arg;
	while (!atomic_load(&g.stop)) {
		int h = (int)cgm_below(&r, NHIER);
		int k = (int)cgm_below(&r, NSLOTS), c = k + NSLOTS, t = k;
		char sub[16], path[PATH_MAX];
		bool make = false;

		if (!made[h][k])
			make = true;
		else if (made[h][c])	/* a child goes before its parent */
			t = c;
		else if (!cgm_below(&r, 3))
			t = c, make = true;
		target_name(sub, sizeof(sub), t);
		cg_path(path, sizeof(path), h, sub);
		if (make) {
			if (mkdir(path, 0755) < 0) {
				churn_error("mkdir", path, errno);
				continue;
			}
			made[h][t] = true;
			atomic_fetch_add(&g.churn.cgroups_made, 1);
		} else if (rmdir(path) < 0) {
			/* The mover put a task in it: it stays for now. */
			if (errno == EBUSY)
				atomic_fetch_add(&g.churn.rmdir_busy, 1);
			else
				churn_error("rmdir", path, errno);
		} else {
			made[h][t] = false;
			atomic_fetch_add(&g.churn.cgroups_removed, 1);
		}
	}
	return NULL;
}

/*
 * A link operation holds rtnl, which every ifpriomap write naming an
 * existing device takes too: after an operation that took d, the thread
 * rests 3d (at most a second), so that it holds rtnl a quarter of the time
 * at most on a fast kernel or a slow one (a deletion took 0.6 s on the
 * debug kernel under TCG) and the writers keep writing.
 */
static void rest_after(double t0)
{
	double d = 3 * (now() - t0);

	usleep((useconds_t)((d < 1 ? d : 1) * 1e6));
}

static void *link_churn(void *arg)
{
	bool dummy[NCHURN_DUMMY] = { false }, vlan[NCHURN_DUMMY] = { false };
	struct cgm_rng r;
	double t0 = 0;

	cgm_seed(&r, g.o.seed, 1001);
	(void)arg;
	for (; !atomic_load(&g.stop); rest_after(t0)) {
		int k = (int)cgm_below(&r, NCHURN_DUMMY), err;
		const char *d = churn_devs[k];
		const char *v = churn_devs[NCHURN_DUMMY + k];

		t0 = now();
		if (!dummy[k]) {
			err = rtnl_add_dummy(&g.rtnl, d);
			if (err)
				churn_error("add dummy", d, err);
			else
				dummy[k] = true;
		} else if (!vlan[k] && cgm_below(&r, 2)) {
			uint16_t vid = (uint16_t)(1 + cgm_below(&r, 4094));

			err = rtnl_add_vlan(&g.rtnl, v, d, vid);
			if (err)
				churn_error("add vlan", v, err);
			else
				vlan[k] = true;
		} else {
			/* A dummy takes its VLAN with it: both at once. */
			const char *which = vlan[k] && cgm_below(&r, 2) ? v : d;

			err = rtnl_del_link(&g.rtnl, which);
			if (err) {
				churn_error("delete", which, err);
			} else {
				vlan[k] = false;
				if (which == d)
					dummy[k] = false;
				atomic_fetch_add(&g.churn.links_deleted, 1);
			}
			continue;
		}
		if (!err)
			atomic_fetch_add(&g.churn.links_added, 1);
	}
	return NULL;
}

/* Write "id\n" to path; 0 or the errno (open's or write's). */
static int write_id(const char *path, int id)
{
	char text[24];
	int fd, err = 0, n = snprintf(text, sizeof(text), "%d\n", id);

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (write(fd, text, (size_t)n) != n)
		err = errno ? errno : EIO;
	close(fd);
	return err;
}

static void *mover(void *arg)
{
	int nw = (int)g.o.writers;
	struct cgm_rng r;

	cgm_seed(&r, g.o.seed, 1002);
	(void)arg;
	while (!atomic_load(&g.stop)) {
		int who = (int)cgm_below(&r, (uint64_t)(NCHILDREN + nw));
		int h = (int)cgm_below(&r, NHIER);
		int where = (int)cgm_below(&r, 5);
		bool thread = who >= NCHILDREN, transient = where >= 3;
		struct writer *w = thread ? &g.w[who - NCHILDREN] : NULL;
		char sub[16], path[PATH_MAX];
		int id = thread ? atomic_load(&w->tid) : g.child[who], err;

		if (!id)
			continue;
		if (transient)
			target_name(sub, sizeof(sub),
				    (int)cgm_below(&r, NTARGETS));
		else if (where)
			snprintf(sub, sizeof(sub), "w%d",
				 (int)cgm_below(&r, (uint64_t)nw));
		/* v1: a thread's tid goes to tasks, a pid to cgroup.procs */
		file_path(path, sizeof(path), h, where ? sub : NULL,
			  thread ? "tasks" : "cgroup.procs");
		err = write_id(path, id);
		if (!err) {
			atomic_fetch_add(&g.churn.moves, 1);
		} else if ((transient && (err == ENOENT || err == ENODEV)) ||
			   (thread && err == ESRCH && atomic_load(&w->done))) {
			atomic_fetch_add(&g.churn.moves_refused, 1);
		} else {
			char what[48];

			snprintf(what, sizeof(what), "move %s %d to",
				 thread ? "thread" : "process", id);
			churn_error(what, path, err);
		}
	}
	return NULL;
}

/* A process in the cgroups with sockets open (net_prio and net_cls tag a
 * task's sockets when it moves), until it is killed. */
static pid_t spawn_child(void)
{
	pid_t parent = getpid(), pid = fork();

	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	socket(AF_INET, SOCK_DGRAM, 0);
	socket(AF_INET6, SOCK_DGRAM, 0);
	socket(AF_PACKET, SOCK_DGRAM, 0);
	for (;;)
		pause();
}

/* ---- setup and cleanup ---- */

static int check_root(int h)
{
	static const char *const probe[NHIER] = { "net_prio.ifpriomap",
						  "net_cls.classid" };
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", g.o.root[h], probe[h]);
	if (stat(path, &st) < 0)
		return runtime_error("%s: no %s there: is it a %s cgroup v1 "
				     "hierarchy? (mount -t cgroup -o %s %s "
				     "DIR; --%s-root DIR)", g.o.root[h],
				     probe[h], hier_name[h], hier_name[h],
				     hier_name[h], h ? "cls" : "prio");
	return 0;
}

static int check_names_free(void)
{
	for (int i = 0; i < NSTABLE + 2 * NCHURN_DUMMY; i++) {
		const char *n = i < NSTABLE ? stable_devs[i] :
				churn_devs[i - NSTABLE];

		if (if_nametoindex(n))
			return runtime_error("device %s exists (left by an "
					     "earlier run?): delete it with "
					     "'ip link del %s' and run again",
					     n, n);
	}
	g.own_names = true;
	return 0;
}

/* The other devices now (lo, eth0, ...): a name of theirs is present. */
static void note_present_devices(void)
{
	DIR *d = opendir("/sys/class/net");
	struct dirent *e;

	while (d && (e = readdir(d)) && g.npresent < 64) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= IFNAMSIZ ||
		    dev_state(e->d_name) != CGM_DEV_ABSENT)
			continue;
		strcpy(g.present[g.npresent++], e->d_name);
	}
	if (d)
		closedir(d);
}

static int make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0)
		return runtime_error("mkdir %s: %s", path, strerror(errno));
	return 0;
}

static int open_writer_files(struct writer *w)
{
	static const char *const file[NHIER] = { "net_prio.ifpriomap",
						 "net_cls.classid" };
	char sub[16], path[PATH_MAX];

	snprintf(sub, sizeof(sub), "w%d", w->idx);
	for (int h = 0; h < NHIER; h++) {
		file_path(path, sizeof(path), h, sub, file[h]);
		w->wfd[h] = open(path, O_WRONLY | O_CLOEXEC);
		w->rfd[h] = open(path, O_RDONLY | O_CLOEXEC);
		if (w->wfd[h] < 0 || w->rfd[h] < 0)
			return runtime_error("open %s: %s", path,
					     strerror(errno));
	}
	return initial_values(w);
}

static int setup(void)
{
	int err;

	for (int h = 0; h < NHIER; h++) {
		err = check_root(h);
		if (err)
			return err;
	}
	err = check_names_free();
	if (err)
		return err;
	err = rtnl_open(&g.rtnl);
	if (err)
		return runtime_error("rtnetlink socket: %s", strerror(err));
	for (int i = 0; i < NSTABLE; i++) {
		err = i < 2 ? rtnl_add_dummy(&g.rtnl, stable_devs[i]) :
		      rtnl_add_vlan(&g.rtnl, stable_devs[i], stable_devs[1], 7);
		if (err)
			return runtime_error("add %s: %s", stable_devs[i],
					     strerror(err));
		g.stable_made[i] = true;
	}
	note_present_devices();
	for (int h = 0; h < NHIER; h++) {
		snprintf(g.top[h], sizeof(g.top[h]), "%s/cgfuzz-%d",
			 g.o.root[h], (int)getpid());
		err = make_dir(g.top[h]);
		if (err)
			return err;
		g.top_made[h] = true;
		for (unsigned int i = 0; i < g.o.writers; i++) {
			char sub[16], path[PATH_MAX];

			snprintf(sub, sizeof(sub), "w%u", i);
			cg_path(path, sizeof(path), h, sub);
			err = make_dir(path);
			if (err)
				return err;
		}
	}
	for (unsigned int i = 0; i < g.o.writers; i++) {
		struct writer *w = &g.w[i];

		w->idx = (int)i;
		cgm_seed(&w->rng, g.o.seed, i);
		cgm_seed(&w->aux, g.o.seed, MAX_WRITERS + i);
		err = open_writer_files(w);
		if (err)
			return err;
	}
	/* Before any thread: fork() of a threaded process is best avoided. */
	for (int i = 0; i < NCHILDREN; i++) {
		g.child[i] = spawn_child();
		if (g.child[i] < 0)
			return runtime_error("fork: %s", strerror(errno));
	}
	return 0;
}

static int start_threads(void)
{
	void *(*const fn[NCHURNERS])(void *) = {
		[CHURN_CGROUPS] = cgroup_churn, [CHURN_LINKS] = link_churn,
		[CHURN_MOVES] = mover,
	};
	int err = 0;

	for (unsigned int i = 0; i < g.o.writers && !err; i++)
		err = fuzz_thread_start(&g.w[i].th, writer_main, &g.w[i]);
	for (int i = 0; i < NCHURNERS && !err; i++)
		if (g.o.churn[i])
			err = fuzz_thread_start(&g.churner[i], fn[i], NULL);
	return err;
}

static void stop_threads(void)
{
	atomic_store(&g.stop, true);
	for (unsigned int i = 0; i < g.o.writers; i++)
		fuzz_thread_join(&g.w[i].th);
	for (int i = 0; i < NCHURNERS; i++)
		fuzz_thread_join(&g.churner[i]);
}

/*
 * rmdir path and every cgroup below it, deepest first.  EBUSY is retried
 * for a while: a thread that pthread_join() returned for may not have
 * left its cgroup yet.  0, or the number of directories left.
 */
static int remove_tree(const char *path)
{
	int left = 0;
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return errno == ENOENT ? 0 : 1;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		left += remove_tree(sub);
	}
	closedir(d);
	for (int i = 0; i < 500; i++) {
		if (!rmdir(path) || errno == ENOENT)
			return left;
		if (errno != EBUSY)
			break;
		usleep(10 * 1000);
	}
	fuzz_report_line("cleanup: rmdir %s: %s", path, strerror(errno));
	return left + 1;
}

static void close_writer_files(void)
{
	for (unsigned int i = 0; i < g.o.writers; i++)
		for (int h = 0; h < NHIER; h++) {
			if (g.w[i].wfd[h] >= 0)
				close(g.w[i].wfd[h]);
			if (g.w[i].rfd[h] >= 0)
				close(g.w[i].rfd[h]);
			g.w[i].wfd[h] = g.w[i].rfd[h] = -1;
		}
}

/* Everything this run made goes; g.leftovers counts what would not. */
static void cleanup(void)
{
	stop_threads();
	for (int i = 0; i < NCHILDREN; i++) {
		if (g.child[i] > 0) {
			kill(g.child[i], SIGKILL);
			waitpid(g.child[i], NULL, 0);
		}
	}
	close_writer_files();
	for (int h = 0; h < NHIER; h++)
		if (g.top_made[h])
			g.leftovers += remove_tree(g.top[h]);
	if (g.rtnl.fd < 0 && rtnl_open(&g.rtnl))
		g.rtnl.fd = -1;
	if (!g.own_names)
		return;
	/* VLANs before their dummies; a device already gone is fine. */
	for (int i = 2 * NCHURN_DUMMY - 1; i >= 0; i--) {
		int err = g.rtnl.fd >= 0 ? rtnl_del_link(&g.rtnl, churn_devs[i])
				       : EBADF;

		if (err && err != ENODEV)
			fuzz_report_line("cleanup: delete %s: %s", churn_devs[i],
				    strerror(err));
	}
	for (int i = NSTABLE - 1; i >= 0; i--) {
		if (g.stable_made[i] && g.rtnl.fd >= 0 &&
		    rtnl_del_link(&g.rtnl, stable_devs[i]))
			fuzz_report_line("cleanup: delete %s failed",
				    stable_devs[i]);
	}
	rtnl_close(&g.rtnl);
	for (int i = 0; i < NSTABLE + 2 * NCHURN_DUMMY; i++) {
		const char *n = i < NSTABLE ? stable_devs[i] :
				churn_devs[i - NSTABLE];

		if (if_nametoindex(n)) {
			fuzz_report_line("cleanup: device %s is still there", n);
			g.leftovers++;
		}
	}
}

/* ---- the report ---- */

static void print_outcomes(uint64_t (*sum)[CGM_NCATS][CGM_NOUTCOMES])
{
	open_json_object("outcomes");
	for (int f = 0; f < CGM_NFILES; f++) {
		open_json_object(cgm_file_name(f));
		for (int c = 0; c < CGM_NCATS; c++) {
			if (!cgm_applies(f, c))
				continue;
			open_json_object(cgm_category_name(c));
			print_text("%-19s %-12s", cgm_file_name(f),
				   cgm_category_name(c));
			for (int o = 0; o < CGM_NOUTCOMES; o++) {
				char fmt[32];

				if (!sum[f][c][o])
					continue;
				snprintf(fmt, sizeof(fmt), " %s %%llu",
					 cgm_outcome_name(o));
				print_uint(PRINT_ANY, cgm_outcome_name(o), fmt,
					   sum[f][c][o]);
			}
			print_text("\n");
			close_json_object();
		}
		close_json_object();
	}
	close_json_object();
}

static void print_examples(void)
{
	open_json_array("mismatch_examples");
	for (int i = 0; i < g.nex; i++) {
		const struct example *e = &g.ex[i];

		open_json_object(NULL);
		print_string(PRINT_JSON, "file", NULL, cgm_file_name(e->file));
		print_string(PRINT_JSON, "category", NULL,
			     cgm_category_name(e->cat));
		print_string(PRINT_JSON, "cgroup", NULL,
			     e->transient ? "transient" : "own");
		print_string(PRINT_JSON, "input", NULL, e->input);
		open_json_array("expected");
		for (int o = 0; o < CGM_NOUTCOMES; o++)
			if (e->allowed & CGM_BIT(o))
				print_string(PRINT_JSON, NULL, NULL,
					     cgm_outcome_name(o));
		close_json_array();
		print_string(PRINT_JSON, "got", NULL, cgm_outcome_name(e->got));
		close_json_object();
	}
	close_json_array();
}

static uint64_t report(enum fuzz_stop why, double elapsed)
{
	static uint64_t sum[CGM_NFILES][CGM_NCATS][CGM_NOUTCOMES];
	uint64_t writes = 0, readbacks = 0, rb_err = 0, mism = 0;
	struct churn *c = &g.churn;

	for (unsigned int i = 0; i < g.o.writers; i++) {
		const struct writer *w = &g.w[i];

		for (int f = 0; f < CGM_NFILES; f++)
			for (int k = 0; k < CGM_NCATS; k++)
				for (int o = 0; o < CGM_NOUTCOMES; o++) {
					sum[f][k][o] += w->count[f][k][o];
					writes += w->count[f][k][o];
				}
		readbacks += w->readbacks;
		rb_err += w->readback_errors;
		mism += w->mismatches;
	}
	new_json_obj(stdout, g.o.cli.json);
	print_uint(PRINT_ANY, "seed", "cgfuzz: seed %llu", g.o.seed);
	print_uint(PRINT_ANY, "writers", ", %llu writers", g.o.writers);
	print_uint(PRINT_ANY, "writes", ": %llu writes", writes);
	print_uint(PRINT_JSON, "target_writes", NULL, g.o.writes);
	print_float(PRINT_ANY, "seconds", " in %.1f s", elapsed);
	print_float(PRINT_ANY, "writes_per_s", " (%.0f/s)",
		    elapsed > 0 ? writes / elapsed : 0);
	print_string(PRINT_ANY, "stopped", ", stopped by %s\n",
		     fuzz_stop_name(why, "writes"));
	print_uint(PRINT_ANY, "mismatches", "mismatches %llu", mism);
	print_uint(PRINT_ANY, "readbacks", ", read-backs %llu", readbacks);
	print_uint(PRINT_ANY, "readback_errors", " (%llu wrong)", rb_err);
	print_uint(PRINT_ANY, "leftovers", ", leftovers %d\n",
		   (unsigned long long)g.leftovers);
	print_outcomes(sum);
	open_json_object("churn");
	print_uint(PRINT_ANY, "cgroups_made", "churn: cgroups made %llu",
		   c->cgroups_made);
	print_uint(PRINT_ANY, "cgroups_removed", ", removed %llu",
		   c->cgroups_removed);
	print_uint(PRINT_ANY, "rmdir_busy", " (busy %llu)", c->rmdir_busy);
	print_uint(PRINT_ANY, "links_added", "; links added %llu",
		   c->links_added);
	print_uint(PRINT_ANY, "links_deleted", ", deleted %llu",
		   c->links_deleted);
	print_uint(PRINT_ANY, "moves", "; moves %llu", c->moves);
	print_uint(PRINT_ANY, "moves_refused", " (refused %llu)",
		   c->moves_refused);
	print_uint(PRINT_ANY, "errors", "; errors %llu\n", c->errors);
	close_json_object();
	print_examples();
	delete_json_obj();
	return mism + rb_err + c->errors + (uint64_t)g.leftovers;
}

int main(int argc, char **argv)
{
	enum fuzz_stop why = FUZZ_STOP_DONE;
	double t0 = 0, t1 = 0;
	int err, sig = 0;

	progname = "cgfuzz";
	g.o = (struct opts){
		.cli = { .shortopts = ":s:n:t:w:c:jh", .longopts = longopts,
			 .usage = usage, .set = set_option, .ctx = &g.o },
		.writes = 100000, .writers = 4, .seconds = 600,
		.churn = { true, true, true },
		.root = { "/sys/fs/cgroup/net_prio", "/sys/fs/cgroup/net_cls" },
	};
	g.rtnl.fd = -1;
	for (int i = 0; i < MAX_WRITERS; i++) {
		memset(g.w[i].wfd, -1, sizeof(g.w[i].wfd));
		memset(g.w[i].rfd, -1, sizeof(g.w[i].rfd));
		memset(g.w[i].tfd, -1, sizeof(g.w[i].tfd));
	}
	err = parse_options(argc, argv, &g.o.cli);
	if (err)
		return err;
	fuzz_begin(g.o.seed_set, &g.o.seed);
	g.page = sysconf(_SC_PAGESIZE);
	err = setup();
	if (!err) {
		t0 = now();
		err = start_threads();
	}
	if (!err)
		why = fuzz_wait(t0, g.o.seconds, &g.writers_done,
				(int)g.o.writers, &sig);
	atomic_store(&g.stop, true);
	t1 = now();
	cleanup();
	if (err)
		return err;
	if (report(why, t1 - t0))
		return EXIT_FAILURE;
	if (why == FUZZ_STOP_SIGNAL)
		return runtime_error("stopped by %s after cleaning up",
				     strsignal(sig));
	return 0;
}
