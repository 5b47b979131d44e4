/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cgfuzz's pure half: the inputs it writes to net_prio.ifpriomap and
 * net_cls.classid, and what Linux 6.1 answers to each, with no I/O, so the
 * host's unit tests (test_cgmodel.c) run it on bytes.
 *
 * The model follows the kernel's own path for a write(2) to a cgroup v1
 * file (read in linux-source-6.1):
 *   - fs/kernfs/file.c kernfs_fop_write_iter(): cgroup files set
 *     atomic_write_len = PAGE_SIZE, so a write longer than a page is E2BIG
 *     before anything is read; otherwise the bytes are copied and a NUL
 *     put after them (an embedded NUL ends the string the parsers see).
 *     A file whose cgroup was removed after open() is ENODEV.
 *   - kernel/cgroup/cgroup.c cgroup_file_write(): 0 bytes return 0;
 *     net_cls.classid is a write_u64 file: kstrtoull(buf, 0) (one '+',
 *     0x hex, 0 octal, one trailing '\n', EINVAL for anything else,
 *     ERANGE past 2^64 - 1), then write_classid() keeps (u32)value.
 *   - net/core/netprio_cgroup.c write_priomap(): sscanf(buf, "%16s %u")
 *     with the kernel's vsscanf(): whitespace is lib/ctype.c's (9-13, 32
 *     and 160), %s takes at most 16 bytes after skipping whitespace, %u
 *     wants a digit first (no sign) and wraps past 2^64 and then to 32
 *     bits; anything after the number is ignored.  Fewer than two fields
 *     is EINVAL; the name is then looked up in the initial namespace:
 *     ENODEV when there is none, else the priority is set.
 */
#ifndef DCBLAB_CGMODEL_H
#define DCBLAB_CGMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cgm_file { CGM_PRIOMAP, CGM_CLASSID, CGM_NFILES };

/*
 * What an input is meant to exercise; the model, not the category,
 * decides the expected result (a "malformed" line can be accepted).
 */
enum cgm_category {
	CGM_VALID,		/* well-formed, on a stable device */
	CGM_MALFORMED,		/* missing fields, words, signs, NULs */
	CGM_OVERLONG,		/* names past IFNAMSIZ, pages */
	CGM_RANGE,		/* numbers past 32 and 64 bits */
	CGM_UNKNOWN_DEV,	/* a device that never exists (ifpriomap) */
	CGM_GONE_DEV,		/* a device coming and going (ifpriomap) */
	CGM_GONE_CGROUP,	/* a cgroup being made and removed */
	CGM_NCATS
};

/* A write's result: OK (the whole input taken), an errno, or neither. */
enum cgm_outcome {
	CGM_OK, CGM_EINVAL, CGM_ENODEV, CGM_ENOENT, CGM_E2BIG, CGM_ERANGE,
	CGM_SHORT,		/* write(2) returned another count */
	CGM_OTHER,		/* any other errno */
	CGM_NOUTCOMES
};

#define CGM_BIT(o)	(1u << (o))

const char *cgm_file_name(enum cgm_file f);	/* "net_prio.ifpriomap" */
const char *cgm_category_name(enum cgm_category c);	/* "valid" */
/* False for the device categories on net_cls.classid. */
bool cgm_applies(enum cgm_file f, enum cgm_category c);
const char *cgm_outcome_name(enum cgm_outcome o);	/* "ok", "EINVAL" */
enum cgm_outcome cgm_outcome_of(int err);		/* errno -> outcome */

/* lib/ctype.c's isspace(): 9-13, ' ' and 160 (Latin-1 NBSP). */
bool cgm_kernel_isspace(unsigned char c);

#define CGM_NAME_MAX	16	/* the %16s of write_priomap() */

/* What the file's parser makes of an input, before any device lookup. */
struct cgm_parse {
	enum cgm_outcome err;	/* OK (parsed), EINVAL, E2BIG, ERANGE */
	bool empty;		/* 0 bytes: write() returns 0, no change */
	char dev[CGM_NAME_MAX + 1];	/* ifpriomap: the name taken */
	uint32_t value;		/* the priority or classid stored */
};

void cgm_parse_priomap(const char *buf, size_t len, size_t page_size,
		       struct cgm_parse *p);
void cgm_parse_classid(const char *buf, size_t len, size_t page_size,
		       struct cgm_parse *p);
void cgm_parse(enum cgm_file f, const char *buf, size_t len,
	       size_t page_size, struct cgm_parse *p);

/* The parsed device, as far as the writer can know it at write time. */
enum cgm_dev_state {
	CGM_DEV_PRESENT,	/* exists throughout the write */
	CGM_DEV_ABSENT,		/* never exists */
	CGM_DEV_RACING,		/* being added or deleted meanwhile */
};

/*
 * The outcomes 6.1 may give, as CGM_BIT()s.  cgroup_racing: the cgroup may
 * be removed or not yet made, so open() may fail ENOENT and write() ENODEV
 * (a removed cgroup's files answer ENODEV before any parsing, except that
 * the page limit is checked first).  The open() is part of the write here.
 */
unsigned int cgm_allowed(enum cgm_file f, const struct cgm_parse *p,
			 enum cgm_dev_state dev, bool cgroup_racing);

/* splitmix64: one 64-bit state, so a run is replayed from its seed. */
struct cgm_rng {
	uint64_t s;
};

void cgm_seed(struct cgm_rng *r, uint64_t seed, uint64_t stream);
uint64_t cgm_next(struct cgm_rng *r);
uint64_t cgm_below(struct cgm_rng *r, uint64_t n);	/* 0..n-1, n > 0 */

/* The device names the generator draws from. */
struct cgm_names {
	const char *const *stable;	/* exist for the whole run */
	int nstable;
	const char *const *churn;	/* added and deleted meanwhile */
	int nchurn;
	const char *unknown_prefix;	/* no device's name starts so */
};

/* The largest input cgm_generate() makes: a few pages. */
#define CGM_INPUT_MAX	(3 * 4096 + 64)

/*
 * One input of category c for file f into buf (CGM_INPUT_MAX bytes); its
 * length (it may hold NULs).  Inputs of CGM_VALID and CGM_GONE_CGROUP
 * name a stable device, CGM_GONE_DEV a churn one; page_size places the
 * overlong ones around the kernel's limit.
 */
size_t cgm_generate(struct cgm_rng *r, enum cgm_file f, enum cgm_category c,
		    const struct cgm_names *names, size_t page_size,
		    char *buf);

/*
 * buf[0..len) as a C string literal's body (\n, \t, \0, \xHH, \\, \"),
 * cut after max input bytes with "...(N bytes)"; out has size bytes.
 */
void cgm_escape(const char *buf, size_t len, size_t max, char *out,
		size_t size);

#endif
