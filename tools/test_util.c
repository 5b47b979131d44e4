// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of util.c: the output writer, the parsers, the messages; and
 * of payload.h's default flow ids.
 */
#include "check.h"
#include "payload.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *out_buf;
static size_t out_len;
static FILE *out_fp;

static void out_begin(bool json)
{
	out_fp = open_memstream(&out_buf, &out_len);
	new_json_obj(out_fp, json);
}

/* What the writer printed since out_begin(); valid until the next begin. */
static const char *out_end(void)
{
	static char *last;

	delete_json_obj();
	fclose(out_fp);
	free(last);
	last = out_buf;
	return last;
}

static int saved_stderr = -1;
static FILE *err_file;

/* stderr goes to a file, so the messages are checked, not just shown. */
static void err_begin(void)
{
	fflush(stderr);
	err_file = tmpfile();
	saved_stderr = dup(STDERR_FILENO);
	dup2(fileno(err_file), STDERR_FILENO);
}

static const char *err_end(void)
{
	static char buf[512];
	size_t n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	rewind(err_file);
	n = fread(buf, 1, sizeof(buf) - 1, err_file);
	buf[n] = '\0';
	fclose(err_file);
	return buf;
}

static void test_json_escapes_strings_and_keys(void)
{
	out_begin(true);
	print_string(PRINT_ANY, "q\"k", "%s", "a\"b\\c/d");
	print_string(PRINT_ANY, "ctl", "%s", "\b\f\n\r\t\x01\x1f\x7f");
	print_string(PRINT_JSON, "none", NULL, NULL);
	CHECK(!strcmp(out_end(), "{\"q\\\"k\":\"a\\\"b\\\\c/d\","
		      "\"ctl\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\","
		      "\"none\":null}\n"));
}

static void test_json_nests_without_stray_commas(void)
{
	out_begin(true);
	print_uint(PRINT_ANY, "a", "%llu", 1);
	open_json_array("empty");
	close_json_array();
	open_json_array("arr");
	print_uint(PRINT_ANY, NULL, "%llu", 0);
	print_int(PRINT_ANY, NULL, "%lld", -2);
	open_json_object(NULL);
	print_null(PRINT_ANY, "x", "-");
	close_json_object();
	open_json_object(NULL);
	close_json_object();
	close_json_array();
	open_json_object("obj");
	open_json_array("inner");
	open_json_array(NULL);
	close_json_array();
	close_json_array();
	close_json_object();
	print_float(PRINT_ANY, "f", "%.1f", 1.5);
	CHECK(!strcmp(out_end(), "{\"a\":1,\"empty\":[],\"arr\":[0,-2,"
		      "{\"x\":null},{}],\"obj\":{\"inner\":[[]]},"
		      "\"f\":1.500000}\n"));
}

static void test_json_has_no_nan(void)
{
	out_begin(true);
	print_float(PRINT_ANY, "nan", "%f", NAN);
	print_float(PRINT_ANY, "inf", "%f", INFINITY);
	CHECK(!strcmp(out_end(), "{\"nan\":null,\"inf\":null}\n"));
}

/* The same calls as in JSON; what each mode leaves out. */
static void print_sample(void)
{
	print_string(PRINT_ANY, "name", "name %s", "eth0");
	print_uint(PRINT_JSON, "hidden", " hidden %llu", 7);
	print_uint(PRINT_FP, "shown", " shown %llu", 8);
	print_uint(PRINT_ANY, "nofmt", NULL, 9);
	open_json_array("list");
	print_int(PRINT_ANY, NULL, " %lld", -1);
	close_json_array();
	print_text(" end\n");
}

static void test_text_and_json_from_one_set_of_calls(void)
{
	out_begin(false);
	print_sample();
	CHECK(!strcmp(out_end(), "name eth0 shown 8 -1 end\n"));
	out_begin(true);
	print_sample();
	CHECK(!strcmp(out_end(), "{\"name\":\"eth0\",\"hidden\":7,"
		      "\"nofmt\":9,\"list\":[-1]}\n"));
}

static void test_parse_u64_edges(void)
{
	uint64_t v = 42;

	CHECK(parse_u64("t", "0x88b5", 0, 0xffff, &v) == 0 && v == 0x88b5);
	CHECK(parse_u64("t", "0X10", 0, 0xffff, &v) == 0 && v == 16);
	/* decimal, not octal: a leading zero is no surprise */
	CHECK(parse_u64("t", "010", 0, 100, &v) == 0 && v == 10);
	CHECK(parse_u64("t", "0", 0, 10, &v) == 0 && v == 0);
	CHECK(parse_u64("t", "10", 0, 10, &v) == 0 && v == 10);
	CHECK(parse_u64("t", "18446744073709551615", 0, UINT64_MAX, &v) == 0 &&
	      v == UINT64_MAX);

	err_begin();
	v = 42;
	CHECK(parse_u64("t", "18446744073709551616", 0, UINT64_MAX, &v) ==
	      EXIT_USAGE);
	CHECK(parse_u64("t", "-1", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", " -1", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", " 5", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "+5", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "5 ", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "5x", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "0x", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "0x-1", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "", 0, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "0", 1, 10, &v) == EXIT_USAGE);
	CHECK(parse_u64("t", "11", 0, 10, &v) == EXIT_USAGE);
	err_end();
	CHECK(v == 42);		/* untouched by every failure */

	err_begin();
	parse_u64("--size", "23", 24, 1472, &v);
	parse_u64("--ethertype", "0x5ff", 0x600, 0xffff, &v);
	CHECK(!strcmp(err_end(),
		      "test: --size '23' is not a number in 24..1472; "
		      "try test -h\n"
		      "test: --ethertype '0x5ff' is not a number in "
		      "0x600..0xffff; try test -h\n"));
}

static void test_parse_seconds_edges(void)
{
	double v = 42;

	CHECK(parse_seconds("t", "2.5", 10, &v) == 0 && v == 2.5);
	CHECK(parse_seconds("t", ".5", 10, &v) == 0 && v == 0.5);
	CHECK(parse_seconds("t", "1e1", 10, &v) == 0 && v == 10);
	err_begin();
	v = 42;
	CHECK(parse_seconds("t", "10.5", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "-1", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "inf", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "nan", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "0x1p1", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "2s", 10, &v) == EXIT_USAGE);
	CHECK(parse_seconds("t", "", 10, &v) == EXIT_USAGE);
	err_end();
	CHECK(v == 42);
}

static void test_parse_mac(void)
{
	uint8_t mac[6] = { 0 };

	CHECK(parse_mac("t", "02:dc:00:01:0a:FF", mac) == 0 &&
	      mac[0] == 0x02 && mac[1] == 0xdc && mac[5] == 0xff);
	CHECK(parse_mac("t", "2:0:0:0:0:1", mac) == 0 && mac[0] == 2 &&
	      mac[5] == 1);
	err_begin();
	CHECK(parse_mac("t", "02:dc:00:01:0a", mac) == EXIT_USAGE);
	CHECK(parse_mac("t", "02:dc:00:01:0a:ff:00", mac) == EXIT_USAGE);
	CHECK(parse_mac("t", "02:dc:00:01:0a:fff", mac) == EXIT_USAGE);
	CHECK(parse_mac("t", "-1:dc:00:01:0a:ff", mac) == EXIT_USAGE);
	CHECK(parse_mac("t", " 2:dc:00:01:0a:ff", mac) == EXIT_USAGE);
	CHECK(parse_mac("t", "02:dc:00:01:0a:", mac) == EXIT_USAGE);
	err_end();
	CHECK(mac[0] == 2 && mac[5] == 1);
}

static void test_usage_error_exits_2_naming_help(void)
{
	int rc;

	err_begin();
	rc = usage_error("need %s", "DEST");
	CHECK(rc == 2 && rc == EXIT_USAGE);
	CHECK(!strcmp(err_end(), "test: need DEST; try test -h\n"));
	err_begin();
	CHECK(runtime_error("eth9: %s", "No such device") == 1);
	CHECK(!strcmp(err_end(), "test: eth9: No such device\n"));
}

static int set_count(void *ctx, int c, const char *arg)
{
	return c == 'c' ? parse_u64("--count", arg, 1, 10, ctx) : 0;
}

/* What parse_options() makes of argv for a tool with -c N and one FILE. */
static int options(char **argv, uint64_t *count, bool *json)
{
	static const struct option lo[] = {
		OPTION_ARG("count", 'c'),
		COMMON_OPTIONS,
	};
	struct cli cli = { .shortopts = ":c:jh", .longopts = lo,
			   .operands = "FILE", .set = set_count, .ctx = count };
	int argc = 0, err;

	while (argv[argc])
		argc++;
	optind = 0;	/* glibc: start over, as for a new argv */
	err = parse_options(argc, argv, &cli);
	*json = cli.json;
	return err;
}

static void test_options_parse_values_flags_and_operands(void)
{
	char *argv[] = { "t", "-j", "--count", "3", "f", NULL };
	uint64_t count = 0;
	bool json = false;

	CHECK(options(argv, &count, &json) == 0);
	CHECK(count == 3 && json && optind == 4);
}

static void test_option_errors_name_the_option(void)
{
	char *unknown_long[] = { "t", "--bogus", "f", NULL };
	char *unknown_short[] = { "t", "-jx", "f", NULL };
	char *missing_long[] = { "t", "f", "--count", NULL };
	char *missing_short[] = { "t", "f", "-c", NULL };
	char *bad_value[] = { "t", "-c", "11", "f", NULL };
	char *no_operand[] = { "t", "-j", NULL };
	char *two_operands[] = { "t", "f", "g", NULL };
	uint64_t count;
	bool json;

	err_begin();
	CHECK(options(unknown_long, &count, &json) == EXIT_USAGE);
	CHECK(options(unknown_short, &count, &json) == EXIT_USAGE);
	CHECK(options(missing_long, &count, &json) == EXIT_USAGE);
	CHECK(options(missing_short, &count, &json) == EXIT_USAGE);
	CHECK(options(bad_value, &count, &json) == EXIT_USAGE);
	CHECK(options(no_operand, &count, &json) == EXIT_USAGE);
	CHECK(options(two_operands, &count, &json) == EXIT_USAGE);
	CHECK(!strcmp(err_end(),
		      "test: unknown option '--bogus'; try test -h\n"
		      "test: unknown option '-x'; try test -h\n"
		      "test: '--count' needs a value; try test -h\n"
		      "test: '-c' needs a value; try test -h\n"
		      "test: --count '11' is not a number in 1..10; "
		      "try test -h\n"
		      "test: need FILE, got 0 operands; try test -h\n"
		      "test: need FILE, got 2 operands; try test -h\n"));
}

static void test_default_flow_ids_are_above_the_hand_given_ones(void)
{
	uint32_t span = UINT32_MAX - FLOW_AUTO_MIN + 1;

	CHECK(flow_auto(0) == FLOW_AUTO_MIN);
	CHECK(flow_auto(1) == FLOW_AUTO_MIN + 1);
	CHECK(flow_auto(span - 1) == UINT32_MAX);
	CHECK(flow_auto(span) == FLOW_AUTO_MIN);
	CHECK(flow_auto(UINT32_MAX) == FLOW_AUTO_MIN + (UINT32_MAX - span));
	/* distinct random numbers below the span give distinct ids */
	CHECK(flow_auto(12345) != flow_auto(54321));
}

void test_util(void)
{
	progname = "test";
	test_json_escapes_strings_and_keys();
	test_json_nests_without_stray_commas();
	test_json_has_no_nan();
	test_text_and_json_from_one_set_of_calls();
	test_parse_u64_edges();
	test_parse_seconds_edges();
	test_parse_mac();
	test_usage_error_exits_2_naming_help();
	test_options_parse_values_flags_and_operands();
	test_option_errors_name_the_option();
	test_default_flow_ids_are_above_the_hand_given_ones();
}
