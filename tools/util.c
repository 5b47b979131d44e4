// SPDX-License-Identifier: GPL-2.0
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *progname = "dcblab";

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void vmessage(const char *fmt, va_list ap, const char *hint)
{
	fprintf(stderr, "%s: ", progname);
	vfprintf(stderr, fmt, ap);
	if (hint)
		fprintf(stderr, "; try %s %s", progname, hint);
	fputc('\n', stderr);
}

int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(fmt, ap, "-h");
	va_end(ap);
	return EXIT_USAGE;
}

int runtime_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(fmt, ap, NULL);
	va_end(ap);
	return EXIT_FAILURE;
}

/*
 * The usage error for what getopt_long() returned as ':' (missing value)
 * or '?' (unknown option), with opterr 0 so that getopt stays silent and
 * this is the one message.
 */
static int option_error(int c, char *const argv[])
{
	/*
	 * getopt_long() has stepped past a long option or a short one ending
	 * its word, so argv[optind - 1] names it; a short option with more
	 * letters after it in the same word is only known by optopt.
	 */
	const char *word = argv[optind - 1];

	if (c == ':')
		return usage_error("'%s' needs a value", word);
	if (!strncmp(word, "--", 2) && (!optopt || strchr(word, '=')))
		return usage_error("unknown option '%s'", word);
	return usage_error("unknown option '-%c'", optopt);
}

static int count_words(const char *s)
{
	int n = 0;

	for (; s && *s; s++)
		n += *s != ' ' && (s[1] == ' ' || !s[1]);
	return n;
}

int parse_options(int argc, char **argv, struct cli *cli)
{
	int c, err = 0, need = count_words(cli->operands);

	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, cli->shortopts,
					cli->longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			cli->usage();
			exit(0);
		case 'j':
			cli->json = true;
			break;
		case ':':
		case '?':
			return option_error(c, argv);
		default:
			if (cli->set)
				err = cli->set(cli->ctx, c, optarg);
		}
	}
	if (err || cli->any_operands || argc - optind == need)
		return err;
	if (!need)
		return usage_error("unexpected operand '%s'", argv[optind]);
	return usage_error("need %s, got %d operand%s", cli->operands,
			   argc - optind, argc - optind == 1 ? "" : "s");
}

int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out)
{
	bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
	unsigned long long v;
	char *end;

	/*
	 * strtoull() skips spaces and negates "-1" into 2^64 - 1, and base 0
	 * would read "010" as 8: take a leading digit and decimal or 0x only.
	 */
	if (!isdigit((unsigned char)text[0]))
		goto bad;
	errno = 0;
	v = strtoull(text, &end, hex ? 16 : 10);
	if (errno || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	if (hex)
		return usage_error("%s '%s' is not a number in 0x%llx..0x%llx",
				   opt, text, (unsigned long long)min,
				   (unsigned long long)max);
	return usage_error("%s '%s' is not a number in %llu..%llu", opt, text,
			   (unsigned long long)min, (unsigned long long)max);
}

int parse_seconds(const char *opt, const char *text, double max, double *out)
{
	char *end;
	double v;

	/* As in parse_u64(); strtod() would also take "inf", "nan" and hex. */
	if ((!isdigit((unsigned char)text[0]) && text[0] != '.') ||
	    strpbrk(text, "xX"))
		goto bad;
	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(v) || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	return usage_error("%s '%s' is not a number of seconds in 0..%.15g",
			   opt, text, max);
}

static int hex_digit(char c)
{
	if (isdigit((unsigned char)c))
		return c - '0';
	if (isxdigit((unsigned char)c))
		return tolower((unsigned char)c) - 'a' + 10;
	return -1;
}

int parse_mac(const char *opt, const char *text, uint8_t mac[6])
{
	uint8_t b[6];
	const char *p = text;

	/* By hand: sscanf's %x would take spaces and signs inside a group. */
	for (int i = 0; i < 6; i++) {
		int n, d, v = 0;

		for (n = 0; n < 2 && (d = hex_digit(*p)) >= 0; n++, p++)
			v = v * 16 + d;
		if (!n || *p != (i < 5 ? ':' : '\0'))
			goto bad;
		b[i] = (uint8_t)v;
		if (*p)
			p++;
	}
	memcpy(mac, b, sizeof(b));
	return 0;
bad:
	return usage_error("%s '%s' is not a MAC address aa:bb:cc:dd:ee:ff",
			   opt, text);
}

/* Deeper than any tool's output; more is a bug in the tool, not input. */
#define MAX_DEPTH 8

/* One output per process, as in iproute2; no tool has a second thread. */
static struct {
	FILE *fp;
	bool json;
	int depth;			/* open objects and arrays */
	bool is_array[MAX_DEPTH];
	bool has_member[MAX_DEPTH];	/* so the next member needs a comma */
} out;

static void json_string(const char *s)
{
	/* Pairs: a character JSON escapes by name, then that name. */
	static const char named[] = "\"\"\\\\\bb\ff\nn\rr\tt";

	fputc('"', out.fp);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		const char *n = named;

		while (*n && (unsigned char)*n != c)
			n += 2;
		if (*n)
			fprintf(out.fp, "\\%c", n[1]);
		else if (c < 0x20)
			fprintf(out.fp, "\\u%04x", c);
		else
			fputc(c, out.fp);
	}
	fputc('"', out.fp);
}

/* The comma and key in front of a JSON value. */
static void json_member(const char *key)
{
	int level = out.depth - 1;

	if (level < 0)
		return;
	if (out.has_member[level])
		fputc(',', out.fp);
	out.has_member[level] = true;
	if (!out.is_array[level]) {
		json_string(key ? key : "");
		fputc(':', out.fp);
	}
}

static void json_open(const char *key, bool array)
{
	if (!out.json)
		return;
	if (out.depth == MAX_DEPTH)
		abort();
	json_member(key);
	fputc(array ? '[' : '{', out.fp);
	out.is_array[out.depth] = array;
	out.has_member[out.depth] = false;
	out.depth++;
}

static void json_close(void)
{
	if (!out.json || !out.depth)
		return;
	out.depth--;
	fputc(out.is_array[out.depth] ? ']' : '}', out.fp);
}

void new_json_obj(FILE *fp, bool json)
{
	out.fp = fp;
	out.json = json;
	out.depth = 0;
	json_open(NULL, false);
}

void delete_json_obj(void)
{
	if (out.json) {
		while (out.depth)
			json_close();
		fputc('\n', out.fp);
	}
	fflush(out.fp);
}

void open_json_object(const char *key)
{
	json_open(key, false);
}

void close_json_object(void)
{
	json_close();
}

void open_json_array(const char *key)
{
	json_open(key, true);
}

void close_json_array(void)
{
	json_close();
}

/* True when t wants JSON now; the comma and key are then printed. */
static bool json_value(enum output_type t, const char *key)
{
	if (!out.json || !(t & PRINT_JSON))
		return false;
	json_member(key);
	return true;
}

static bool text_value(enum output_type t, const char *fmt)
{
	return !out.json && (t & PRINT_FP) && fmt;
}

/* Integers print the same way but for their C type and JSON format. */
#define PRINT_INTEGER(name, type, json_fmt)				\
void print_##name(enum output_type t, const char *key, const char *fmt,	\
		  type value)						\
{									\
	if (json_value(t, key))						\
		fprintf(out.fp, json_fmt, value);			\
	else if (text_value(t, fmt))					\
		fprintf(out.fp, fmt, value);				\
}

PRINT_INTEGER(uint, unsigned long long, "%llu")
PRINT_INTEGER(int, long long, "%lld")

void print_float(enum output_type t, const char *key, const char *fmt,
		 double value)
{
	if (!json_value(t, key)) {
		if (text_value(t, fmt))
			fprintf(out.fp, fmt, value);
	} else if (isfinite(value)) {
		fprintf(out.fp, "%.6f", value);
	} else {
		fputs("null", out.fp);
	}
}

void print_string(enum output_type t, const char *key, const char *fmt,
		  const char *value)
{
	if (!json_value(t, key)) {
		if (text_value(t, fmt))
			fprintf(out.fp, fmt, value ? value : "");
	} else if (value) {
		json_string(value);
	} else {
		fputs("null", out.fp);
	}
}

void print_null(enum output_type t, const char *key, const char *fmt)
{
	if (json_value(t, key))
		fputs("null", out.fp);
	else if (text_value(t, fmt))
		fputs(fmt, out.fp);
}

void print_text(const char *fmt, ...)
{
	va_list ap;

	if (out.json)
		return;
	va_start(ap, fmt);
	vfprintf(out.fp, fmt, ap);
	va_end(ap);
}

/* EINVAL for EINVAL: tests assert what the kernel answered by name. */
static const struct {
	int err;
	const char *name;
} errnames[] = {
	{ EINVAL, "EINVAL" }, { ENODEV, "ENODEV" }, { ENOENT, "ENOENT" },
	{ EPERM, "EPERM" }, { EACCES, "EACCES" }, { EBUSY, "EBUSY" },
	{ ENOSPC, "ENOSPC" }, { ERANGE, "ERANGE" }, { ENOMEM, "ENOMEM" },
	{ EEXIST, "EEXIST" }, { ESRCH, "ESRCH" }, { EOPNOTSUPP, "EOPNOTSUPP" },
	{ ENXIO, "ENXIO" }, { E2BIG, "E2BIG" }, { EBADF, "EBADF" },
};

const char *errname(int err)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	return "E?";
}
