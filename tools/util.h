/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What priosend, priosink and cgwrite share: the clock, error messages,
 * range-checked option parsing and one writer for text and JSON output.
 *
 * Exit statuses are the same in every tool: 0 ok, EXIT_FAILURE (1) when
 * the system said no, EXIT_USAGE (2) when the command line is wrong.  A
 * helper that can fail returns 0 or the exit status to end with, having
 * printed why, so callers pass the value up unchanged.
 */
#ifndef DCBLAB_UTIL_H
#define DCBLAB_UTIL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2

/* An option that takes a value: short letter c, long --name. */
#define OPTION_ARG(name, c)	{ name, required_argument, NULL, c }

/* -j and -h mean the same in every tool; this ends each option table. */
#define COMMON_OPTIONS					\
	{ "json", no_argument, NULL, 'j' },		\
	{ "help", no_argument, NULL, 'h' },		\
	{ NULL, 0, NULL, 0 }

/* The name every message starts with: main() sets it first thing. */
extern const char *progname;

/* An errno's name ("EINVAL"), "E?" for one not in the table. */
const char *errname(int err);

/* CLOCK_MONOTONIC in seconds: immune to the wall clock being set. */
double now(void);

/* "PROG: message; try PROG -h" on stderr; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "PROG: message" on stderr; returns EXIT_FAILURE. */
int runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A tool's command line, for parse_options(). */
struct cli {
	/* Starts with ':' so getopt tells missing values from unknowns. */
	const char *shortopts;
	const struct option *longopts;	/* ends with COMMON_OPTIONS */
	const char *operands;		/* e.g. "PATH VALUE"; NULL: none */
	bool any_operands;		/* the tool counts its operands itself */
	void (*usage)(void);
	/* Every option but -h and -j; 0 or the exit status.  May be NULL. */
	int (*set)(void *ctx, int c, const char *arg);
	void *ctx;
	bool json;			/* -j was given */
};

/*
 * getopt_long() over argv, doing what every tool does alike: -h prints
 * usage() and exits 0, -j sets cli->json, an unknown option, a missing
 * value or the wrong number of operands is a usage error; parsing stops at
 * the first error.  0, or the exit status; optind is then at the first
 * operand.
 */
int parse_options(int argc, char **argv, struct cli *cli);

/*
 * Option values.  Each returns 0, or usage_error()'s EXIT_USAGE after a
 * message naming opt, text and what is accepted.
 *
 * parse_u64: a whole number in [min, max], decimal or 0x hex; no sign, no
 * spaces, and no octal: "010" is ten.
 */
int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out);
/* Decimal seconds in [0, max], e.g. "2.5" or "1e3". */
int parse_seconds(const char *opt, const char *text, double max, double *out);
/* aa:bb:cc:dd:ee:ff */
int parse_mac(const char *opt, const char *text, uint8_t mac[6]);

/*
 * Text and JSON from one sequence of calls, after iproute2's
 * lib/json_print.c: each value is printed by one call that carries both its
 * JSON key and its text format, e.g.
 *	print_uint(PRINT_ANY, "frames", "%llu frames", frames);
 * prints "frames":N in JSON mode and "N frames" in text mode.  PRINT_JSON
 * values are left out of the text and PRINT_FP ones out of the JSON; a NULL
 * fmt prints nothing in text mode.  Objects and arrays exist in JSON only;
 * keys are NULL for the members of an array.  JSON floats have six
 * decimals, and are null when not finite (JSON has no NaN).
 */
enum output_type {
	PRINT_FP = 1,
	PRINT_JSON = 2,
	PRINT_ANY = PRINT_FP | PRINT_JSON,
};

/* Start output to fp; in JSON mode this opens the one top-level object. */
void new_json_obj(FILE *fp, bool json);
/* Close what new_json_obj() opened and end the JSON line; flushes fp. */
void delete_json_obj(void);
void open_json_object(const char *key);
void close_json_object(void);
void open_json_array(const char *key);
void close_json_array(void);
void print_uint(enum output_type t, const char *key, const char *fmt,
		unsigned long long value);
void print_int(enum output_type t, const char *key, const char *fmt,
	       long long value);
void print_float(enum output_type t, const char *key, const char *fmt,
		 double value);
void print_string(enum output_type t, const char *key, const char *fmt,
		  const char *value);
/* In text mode fmt is printed as it is: there is no value to format. */
void print_null(enum output_type t, const char *key, const char *fmt);
/* Text mode only: headers, separators, the end of a line. */
void print_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
