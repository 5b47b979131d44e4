// SPDX-License-Identifier: GPL-2.0
/* cgfuzz's inputs and the model of 6.1's answers; see cgmodel.h. */
#include "cgmodel.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const file_names[CGM_NFILES] = {
	[CGM_PRIOMAP] = "net_prio.ifpriomap",
	[CGM_CLASSID] = "net_cls.classid",
};

static const char *const category_names[CGM_NCATS] = {
	[CGM_VALID] = "valid",
	[CGM_MALFORMED] = "malformed",
	[CGM_OVERLONG] = "overlong",
	[CGM_RANGE] = "range",
	[CGM_UNKNOWN_DEV] = "unknown_dev",
	[CGM_GONE_DEV] = "gone_dev",
	[CGM_GONE_CGROUP] = "gone_cgroup",
};

static const char *const outcome_names[CGM_NOUTCOMES] = {
	[CGM_OK] = "ok", [CGM_EINVAL] = "EINVAL", [CGM_ENODEV] = "ENODEV",
	[CGM_ENOENT] = "ENOENT", [CGM_E2BIG] = "E2BIG",
	[CGM_ERANGE] = "ERANGE", [CGM_SHORT] = "short",
	[CGM_OTHER] = "other",
};

const char *cgm_file_name(enum cgm_file f)
{
	return file_names[f];
}

const char *cgm_category_name(enum cgm_category c)
{
	return category_names[c];
}

bool cgm_applies(enum cgm_file f, enum cgm_category c)
{
	return f == CGM_PRIOMAP ||
	       (c != CGM_UNKNOWN_DEV && c != CGM_GONE_DEV);
}

const char *cgm_outcome_name(enum cgm_outcome o)
{
	return outcome_names[o];
}

enum cgm_outcome cgm_outcome_of(int err)
{
	switch (err) {
	case 0:
		return CGM_OK;
	case EINVAL:
		return CGM_EINVAL;
	case ENODEV:
		return CGM_ENODEV;
	case ENOENT:
		return CGM_ENOENT;
	case E2BIG:
		return CGM_E2BIG;
	case ERANGE:
		return CGM_ERANGE;
	default:
		return CGM_OTHER;
	}
}

bool cgm_kernel_isspace(unsigned char c)
{
	return (c >= 9 && c <= 13) || c == ' ' || c == 160;
}

static bool kdigit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool kxdigit(unsigned char c)
{
	return kdigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* The bytes a kernel parser sees: up to the first NUL of the copy. */
static const unsigned char *as_string(const char *buf)
{
	return (const unsigned char *)buf;
}

/* Common to both files: the page limit and the empty write. */
static bool before_parsing(size_t len, size_t page_size, struct cgm_parse *p)
{
	memset(p, 0, sizeof(*p));
	if (len > page_size) {
		p->err = CGM_E2BIG;
		return true;
	}
	if (!len) {
		p->err = CGM_OK;
		p->empty = true;
		return true;
	}
	return false;
}

/*
 * The caller's buffer is not NUL-terminated after len bytes: the kernel's
 * copy is.  These parsers stop at a NUL or at len, whichever is first.
 */
static unsigned char at(const unsigned char *s, size_t len, size_t i)
{
	return i < len ? s[i] : 0;
}

void cgm_parse_priomap(const char *buf, size_t len, size_t page_size,
		       struct cgm_parse *p)
{
	const unsigned char *s = as_string(buf);
	uint64_t v = 0;
	size_t i = 0;
	int n = 0;

	if (before_parsing(len, page_size, p))
		return;
	p->err = CGM_EINVAL;
	/* vsscanf gives up on an empty string before the first conversion. */
	if (!at(s, len, 0))
		return;
	while (cgm_kernel_isspace(at(s, len, i)))
		i++;
	while (at(s, len, i) && !cgm_kernel_isspace(at(s, len, i)) &&
	       n < CGM_NAME_MAX)
		p->dev[n++] = (char)s[i++];
	p->dev[n] = '\0';
	while (cgm_kernel_isspace(at(s, len, i)))
		i++;
	if (!kdigit(at(s, len, i)))
		return;
	/* simple_strntoull(): wraps silently past 2^64; %u keeps 32 bits. */
	for (; kdigit(at(s, len, i)); i++)
		v = v * 10 + (s[i] - '0');
	p->value = (uint32_t)v;
	p->err = CGM_OK;
}

void cgm_parse_classid(const char *buf, size_t len, size_t page_size,
		       struct cgm_parse *p)
{
	const unsigned char *s = as_string(buf);
	unsigned int base = 10;
	bool overflow = false;
	uint64_t v = 0;
	size_t i = 0, digits = 0;

	if (before_parsing(len, page_size, p))
		return;
	if (at(s, len, 0) == '+')
		i++;
	if (at(s, len, i) == '0') {
		base = 8;
		if ((at(s, len, i + 1) | 0x20) == 'x' &&
		    kxdigit(at(s, len, i + 2))) {
			base = 16;
			i += 2;
		}
	}
	for (;; i++, digits++) {
		unsigned char c = at(s, len, i);
		unsigned int d;

		if (kdigit(c))
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			break;
		if (d >= base)
			break;
		/* The kernel flags it and goes on: ERANGE wins later. */
		if (__builtin_mul_overflow(v, base, &v) ||
		    __builtin_add_overflow(v, d, &v))
			overflow = true;
	}
	if (overflow) {
		p->err = CGM_ERANGE;
		return;
	}
	p->err = CGM_EINVAL;
	if (!digits)
		return;
	if (at(s, len, i) == '\n')
		i++;
	if (at(s, len, i))
		return;
	p->value = (uint32_t)v;
	p->err = CGM_OK;
}

void cgm_parse(enum cgm_file f, const char *buf, size_t len,
	       size_t page_size, struct cgm_parse *p)
{
	if (f == CGM_PRIOMAP)
		cgm_parse_priomap(buf, len, page_size, p);
	else
		cgm_parse_classid(buf, len, page_size, p);
}

unsigned int cgm_allowed(enum cgm_file f, const struct cgm_parse *p,
			 enum cgm_dev_state dev, bool cgroup_racing)
{
	unsigned int ok = 0;

	if (p->err != CGM_OK || p->empty || f == CGM_CLASSID)
		ok = CGM_BIT(p->err);
	else if (dev == CGM_DEV_PRESENT)
		ok = CGM_BIT(CGM_OK);
	else if (dev == CGM_DEV_ABSENT)
		ok = CGM_BIT(CGM_ENODEV);
	else
		ok = CGM_BIT(CGM_OK) | CGM_BIT(CGM_ENODEV);
	if (cgroup_racing) {
		ok |= CGM_BIT(CGM_ENOENT);
		if (p->err != CGM_E2BIG)
			ok |= CGM_BIT(CGM_ENODEV);
	}
	return ok;
}

/* ---- the random source ---- */

void cgm_seed(struct cgm_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = seed ^ (stream * 0xd1342543de82ef95ULL);
	cgm_next(r);
}

uint64_t cgm_next(struct cgm_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t cgm_below(struct cgm_rng *r, uint64_t n)
{
	/* The bias of a modulo is far below what matters for a fuzzer. */
	return cgm_next(r) % n;
}

static bool coin(struct cgm_rng *r, unsigned int one_in)
{
	return cgm_below(r, one_in) == 0;
}

/* ---- building inputs ---- */

struct gbuf {
	char *p;
	size_t len;
};

static void put_bytes(struct gbuf *b, const void *data, size_t n)
{
	if (b->len + n > CGM_INPUT_MAX)
		n = CGM_INPUT_MAX - b->len;
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void put(struct gbuf *b, const char *s)
{
	put_bytes(b, s, strlen(s));
}

static void putch(struct gbuf *b, char c)
{
	put_bytes(b, &c, 1);
}

static void putf(struct gbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void putf(struct gbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		put_bytes(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n :
			  sizeof(tmp) - 1);
}

static const char *pick(struct cgm_rng *r, const char *const *from, int n)
{
	return from[cgm_below(r, (uint64_t)n)];
}

static const char *stable(struct cgm_rng *r, const struct cgm_names *nm)
{
	return pick(r, nm->stable, nm->nstable);
}

/* A device name: mostly stable ones, so results are about parsing. */
static const char *some_dev(struct cgm_rng *r, const struct cgm_names *nm)
{
	return coin(r, 4) ? pick(r, nm->churn, nm->nchurn) : stable(r, nm);
}

/* A priority as people write them: 0-7, sometimes any 32-bit number. */
static uint32_t some_prio(struct cgm_rng *r)
{
	return coin(r, 4) ? (uint32_t)cgm_next(r) : (uint32_t)cgm_below(r, 8);
}

static void newline_maybe(struct cgm_rng *r, struct gbuf *b)
{
	if (coin(r, 2))
		putch(b, '\n');
}

/* Whitespace the kernel skips, including the odd ones (\v, \f, 160). */
static void kernel_space(struct cgm_rng *r, struct gbuf *b)
{
	static const char ws[] = { ' ', '\t', '\n', '\v', '\f', '\r',
				   (char)160 };
	int n = 1 + (int)cgm_below(r, 3);

	while (n--)
		putch(b, ws[cgm_below(r, sizeof(ws))]);
}

static void random_digits(struct cgm_rng *r, struct gbuf *b, int n)
{
	while (n--)
		putch(b, (char)('0' + cgm_below(r, 10)));
}

static const char *const words[] = {
	"high", "low", "x", "five", "nan", "inf", "-", "+", "0x", "ff",
	"veth", "1e3", "5.0", "--", "\xc2\xa0", "\\n",
};

/*
 * A line of random tokens: names, numbers in every form, spaces of every
 * kind, signs, NULs and bytes no name has.  Most are refused; the model,
 * not this function, says which.
 */
static void random_tokens(struct cgm_rng *r, const struct cgm_names *nm,
			  struct gbuf *b)
{
	int n = 1 + (int)cgm_below(r, 6);

	while (n--) {
		switch (cgm_below(r, 12)) {
		case 0:
		case 1:
			put(b, some_dev(r, nm));
			break;
		case 2:
			putf(b, "%" PRIu32, some_prio(r));
			break;
		case 3:
			random_digits(r, b, 1 + (int)cgm_below(r, 25));
			break;
		case 4:
			putf(b, "0x%" PRIx64, cgm_next(r) >> cgm_below(r, 64));
			break;
		case 5:
		case 6:
			kernel_space(r, b);
			break;
		case 7:
			putch(b, "+-:;,./"[cgm_below(r, 7)]);
			break;
		case 8:
			put(b, words[cgm_below(r, sizeof(words) /
					       sizeof(words[0]))]);
			break;
		case 9:
			putch(b, '\0');
			break;
		case 10:
			putch(b, (char)(128 + cgm_below(r, 128)));
			break;
		default:
			putch(b, (char)(1 + cgm_below(r, 31)));
			break;
		}
	}
}

/* A "name prio" line with each way of breaking it. */
static void priomap_malformed(struct cgm_rng *r, const struct cgm_names *nm,
			      struct gbuf *b)
{
	const char *dev = some_dev(r, nm);
	uint32_t prio = some_prio(r);

	switch (cgm_below(r, 24)) {
	case 0:			/* no priority */
		put(b, dev);
		newline_maybe(r, b);
		break;
	case 1:			/* the commit message's notation */
		putf(b, "%s:%" PRIu32, dev, prio);
		break;
	case 2:			/* a word for the priority */
		putf(b, "%s %s", dev, words[cgm_below(r, 4)]);
		break;
	case 3:			/* a sign */
		putf(b, "%s %c%" PRIu32, dev, coin(r, 2) ? '-' : '+', prio);
		break;
	case 4:			/* trailing garbage after the number */
		putf(b, "%s %" PRIu32 "%s", dev, prio,
		     coin(r, 2) ? "abc" : coin(r, 2) ? " 6" : ";x");
		break;
	case 5:			/* nothing at all */
		break;
	case 6:			/* only whitespace */
		kernel_space(r, b);
		break;
	case 7:			/* a NUL somewhere in a good line */
		switch (cgm_below(r, 4)) {
		case 0:
			put(b, dev);
			putch(b, '\0');
			putf(b, " %" PRIu32, prio);
			break;
		case 1:
			putf(b, "%s %" PRIu32, dev, prio);
			putch(b, '\0');
			put(b, "junk");
			break;
		case 2:
			putch(b, '\0');
			putf(b, "%s %" PRIu32, dev, prio);
			break;
		default:
			putf(b, "%s ", dev);
			putch(b, '\0');
			putf(b, "%" PRIu32, prio);
		}
		break;
	case 8:			/* two lines: only the first counts */
		putf(b, "%s %" PRIu32 "\n%s %" PRIu32, dev, prio,
		     some_dev(r, nm), some_prio(r));
		break;
	case 9:			/* a newline first, or between fields */
		putf(b, coin(r, 2) ? "\n%s %" PRIu32 : "%s\n%" PRIu32, dev,
		     prio);
		break;
	case 10:		/* leading whitespace */
		kernel_space(r, b);
		putf(b, "%s %" PRIu32, dev, prio);
		break;
	case 11:		/* any kernel whitespace between the fields */
		put(b, dev);
		kernel_space(r, b);
		putf(b, "%" PRIu32, prio);
		break;
	case 12:		/* %u is decimal: 0x10 is 0, 010 is 10 */
		putf(b, coin(r, 2) ? "%s 0x%" PRIx32 : "%s 0%" PRIo32, dev,
		     prio);
		break;
	case 13:		/* fields swapped */
		putf(b, "%" PRIu32 " %s", prio, dev);
		break;
	case 14:		/* a number alone */
		putf(b, "%" PRIu32, prio);
		break;
	case 15:		/* separators that are not whitespace here */
		put(b, dev);
		putch(b, "\x1c\x1f\x85\xff,"[cgm_below(r, 5)]);
		putf(b, "%" PRIu32, prio);
		break;
	default:
		random_tokens(r, nm, b);
	}
}

static void classid_malformed(struct cgm_rng *r, const struct cgm_names *nm,
			      struct gbuf *b)
{
	uint32_t v = (uint32_t)cgm_next(r) >> cgm_below(r, 32);

	switch (cgm_below(r, 24)) {
	case 0:			/* nothing at all */
		break;
	case 1:			/* leading or trailing whitespace */
		kernel_space(r, b);
		putf(b, "%" PRIu32, v);
		break;
	case 2:
		putf(b, "%" PRIu32, v);
		kernel_space(r, b);
		break;
	case 3:			/* a sign, or two */
		putf(b, "%s%" PRIu32,
		     (const char *[]){ "-", "+", "++", "+-", "-+" }
		     [cgm_below(r, 5)], v);
		break;
	case 4:			/* a prefix without digits */
		put(b, (const char *[]){ "0x", "0X", "0xg", "0x ", "0x\n",
					 "+0x" }[cgm_below(r, 6)]);
		break;
	case 5:			/* octal: 08 and 09 are not numbers */
		putf(b, "0%" PRIu32 "%c", v, coin(r, 2) ? '8' : '9');
		break;
	case 6:			/* octal that is: 010 is 8 */
		putf(b, "0%" PRIo32, v);
		newline_maybe(r, b);
		break;
	case 7:			/* one trailing newline only */
		putf(b, "%" PRIu32 "%s", v,
		     (const char *[]){ "\n\n", "\r\n", "\n ", " \n" }
		     [cgm_below(r, 4)]);
		break;
	case 8:			/* a NUL ends what the kernel parses */
		putf(b, "%" PRIu32, v);
		if (coin(r, 2))
			putch(b, '\n');
		putch(b, '\0');
		put(b, coin(r, 2) ? "junk" : "5");
		break;
	case 9:
		putch(b, '\0');
		putf(b, "%" PRIu32, v);
		break;
	case 10:		/* tc's major:minor is not accepted here */
		putf(b, "%" PRIx32 ":%" PRIx32, v >> 16, v & 0xffff);
		break;
	case 11:		/* words and hex digits in a decimal */
		put(b, words[cgm_below(r, sizeof(words) / sizeof(words[0]))]);
		break;
	case 12:
		putf(b, "%" PRIu32 "%s", v,
		     (const char *[]){ "abc", "f", "x", ".0", "e3" }
		     [cgm_below(r, 5)]);
		break;
	case 13:		/* a newline first */
		putf(b, "\n%" PRIu32, v);
		break;
	case 14:		/* hex with a sign or a bad digit */
		putf(b, "%s0x%" PRIx32 "%s", coin(r, 2) ? "+" : "", v,
		     coin(r, 2) ? "" : "g");
		break;
	case 15:		/* two numbers */
		putf(b, "%" PRIu32 " %" PRIu32, v, v + 1);
		break;
	default:
		random_tokens(r, nm, b);
	}
}

/* Around the page limit: under, at, just over, well over. */
static size_t page_length(struct cgm_rng *r, size_t page_size)
{
	switch (cgm_below(r, 6)) {
	case 0:
		return page_size;
	case 1:
		return page_size + 1;
	case 2:
		return page_size - 1;
	case 3:
		return page_size - 8 + cgm_below(r, 17);
	case 4:
		return 2 * page_size + cgm_below(r, page_size);
	default:
		return 64 + cgm_below(r, page_size - 64);
	}
}

/* Fill b up to len with one kind of byte after what it holds. */
static void pad_to(struct cgm_rng *r, struct gbuf *b, size_t len)
{
	int kind = (int)cgm_below(r, 5);

	while (b->len < len && b->len < CGM_INPUT_MAX) {
		switch (kind) {
		case 0:
			putch(b, ' ');
			break;
		case 1:
			putch(b, '\n');
			break;
		case 2:
			putch(b, '\0');
			break;
		case 3:
			putch(b, (char)('0' + cgm_below(r, 10)));
			break;
		default:
			putch(b, (char)('a' + cgm_below(r, 26)));
		}
	}
}

static void priomap_overlong(struct cgm_rng *r, const struct cgm_names *nm,
			     size_t page_size, struct gbuf *b)
{
	static const char namechars[] =
		"abcdefghijklmnopqrstuvwxyz0123456789.-_";
	const size_t nnamechars = sizeof(namechars) - 1;

	if (coin(r, 2)) {	/* a name past IFNAMSIZ */
		size_t want = CGM_NAME_MAX - 1 + cgm_below(r, 26);

		put(b, some_dev(r, nm));
		while (b->len < want)
			putch(b, namechars[cgm_below(r, nnamechars)]);
		if (!coin(r, 4))
			putch(b, ' ');
		putf(b, "%" PRIu32, some_prio(r));
	} else {		/* a write around the page limit */
		size_t len = page_length(r, page_size);

		if (coin(r, 4)) {
			while (b->len + 16 < len)
				putch(b, ' ');
		}
		putf(b, "%s %" PRIu32, stable(r, nm), some_prio(r));
		pad_to(r, b, len);
	}
}

static void classid_overlong(struct cgm_rng *r, size_t page_size,
			     struct gbuf *b)
{
	size_t len = page_length(r, page_size);

	switch (cgm_below(r, 4)) {
	case 0:			/* leading zeros: octal, however long */
		while (b->len + 12 < len)
			putch(b, '0');
		putf(b, "%" PRIo32, (uint32_t)cgm_next(r));
		break;
	case 1:			/* all digits: past 2^64 at 21 */
		random_digits(r, b, (int)(len > CGM_INPUT_MAX ?
					  CGM_INPUT_MAX : len));
		break;
	default:		/* a good number, then padding */
		putf(b, "%" PRIu32, (uint32_t)cgm_next(r));
		newline_maybe(r, b);
		pad_to(r, b, len);
	}
	if (b->len < len)
		pad_to(r, b, len);
}

/* Numbers past 32 and 64 bits, as decimal (or, for classid, any base). */
static void big_number(struct cgm_rng *r, enum cgm_file f, struct gbuf *b)
{
	uint64_t k = cgm_below(r, 16);

	switch (cgm_below(r, f == CGM_CLASSID ? 12 : 8)) {
	case 0:			/* lab 3's 2^32 + 2 among them */
		putf(b, "%" PRIu64, ((uint64_t)1 << 32) + k);
		break;
	case 1:
		putf(b, "%" PRIu64, ((uint64_t)1 << 32) - 1 - k);
		break;
	case 2:
		putf(b, "%" PRIu64, UINT64_MAX - k);
		break;
	case 3:			/* 2^64 + k: kept as text */
		putf(b, "184467440737095516%02" PRIu64, 16 + k);
		break;
	case 4:
		putf(b, "%" PRIu64, cgm_next(r) | ((uint64_t)1 << 63));
		break;
	case 5:
		putf(b, "%" PRIu64, (cgm_below(r, 1ULL << 31) << 32) + k);
		break;
	case 6:
		random_digits(r, b, 20 + (int)cgm_below(r, 30));
		break;
	case 7:			/* 2^65 */
		put(b, "36893488147419103232");
		break;
	case 8:
		put(b, coin(r, 2) ? "0xffffffffffffffff" :
		    "0x10000000000000000");
		break;
	case 9:			/* 2^64 - 1 and 2^64 in octal */
		put(b, coin(r, 2) ? "01777777777777777777777" :
		    "02000000000000000000000");
		break;
	case 10:
		putf(b, "0x%" PRIx64, cgm_next(r) | ((uint64_t)1 << 32));
		break;
	default:
		putf(b, "+%" PRIu64, ((uint64_t)1 << 32) + k);
	}
}

size_t cgm_generate(struct cgm_rng *r, enum cgm_file f, enum cgm_category c,
		    const struct cgm_names *names, size_t page_size,
		    char *buf)
{
	struct gbuf b = { .p = buf };
	const char *dev;

	switch (c) {
	case CGM_VALID:
	case CGM_GONE_CGROUP:
		if (f == CGM_PRIOMAP) {
			putf(&b, "%s %" PRIu32, stable(r, names),
			     some_prio(r));
		} else {
			uint32_t v = (uint32_t)cgm_next(r) >> cgm_below(r, 32);

			putf(&b, coin(r, 3) ? "0x%" PRIx32 : "%" PRIu32, v);
		}
		newline_maybe(r, &b);
		break;
	case CGM_MALFORMED:
		if (f == CGM_PRIOMAP)
			priomap_malformed(r, names, &b);
		else
			classid_malformed(r, names, &b);
		break;
	case CGM_OVERLONG:
		if (f == CGM_PRIOMAP)
			priomap_overlong(r, names, page_size, &b);
		else
			classid_overlong(r, page_size, &b);
		break;
	case CGM_RANGE:
		if (f == CGM_PRIOMAP)
			putf(&b, "%s ", stable(r, names));
		big_number(r, f, &b);
		newline_maybe(r, &b);
		break;
	case CGM_UNKNOWN_DEV:
		switch (cgm_below(r, 5)) {
		case 0:		/* a name no device has, <= 15 bytes */
			put(&b, names->unknown_prefix);
			random_digits(r, &b, 1 + (int)cgm_below(r,
				15 - strlen(names->unknown_prefix)));
			break;
		case 1:		/* a stable name with an alias suffix */
			putf(&b, "%s:%u", stable(r, names),
			     (unsigned int)cgm_below(r, 10));
			break;
		case 2:		/* names the kernel never gives */
			put(&b, (const char *[]){ ".", "..", "a/b", "/",
						  "\xff\xfe" }
			    [cgm_below(r, 5)]);
			break;
		case 3:		/* a name that is exactly 16 bytes */
			put(&b, names->unknown_prefix);
			while (b.len < CGM_NAME_MAX)
				putch(&b, 'x');
			break;
		default:	/* a stable name, cut or grown by one byte */
			dev = stable(r, names);
			if (coin(r, 2))
				put_bytes(&b, dev, strlen(dev) - 1);
			else
				putf(&b, "%sz", dev);
		}
		putf(&b, " %" PRIu32, some_prio(r));
		newline_maybe(r, &b);
		break;
	case CGM_GONE_DEV:
		putf(&b, "%s %" PRIu32, pick(r, names->churn, names->nchurn),
		     some_prio(r));
		newline_maybe(r, &b);
		break;
	default:
		break;
	}
	return b.len;
}

void cgm_escape(const char *buf, size_t len, size_t max, char *out,
		size_t size)
{
	size_t o = 0, i;

	if (!size)
		return;
	for (i = 0; i < len && i < max; i++) {
		unsigned char c = (unsigned char)buf[i];
		char tmp[8];

		if (c == '\n')
			strcpy(tmp, "\\n");
		else if (c == '\t')
			strcpy(tmp, "\\t");
		else if (c == '\\' || c == '"')
			snprintf(tmp, sizeof(tmp), "\\%c", c);
		else if (c == '\0')
			/* \0 before a digit would read as octal: \x00 then */
			strcpy(tmp, i + 1 < len && kdigit((unsigned char)
				buf[i + 1]) ? "\\x00" : "\\0");
		else if (c < 32 || c >= 127)
			snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		else
			snprintf(tmp, sizeof(tmp), "%c", c);
		if (o + strlen(tmp) + 1 > size)
			break;
		memcpy(out + o, tmp, strlen(tmp));
		o += strlen(tmp);
	}
	out[o] = '\0';
	if (i < len)
		snprintf(out + o, size - o, "...(%zu bytes)", len);
}
