// SPDX-License-Identifier: GPL-2.0
/*
 * dcblab-tools - every guest tool in one static binary, run by the name it
 * is called under (a symlink: /usr/bin/priosend -> dcblab-tools), or as
 * `dcblab-tools NAME ARGS...`.  The Makefile generates tools.h, one
 * TOOL(name, function) line per tool, each tool's main() renamed.
 */
#include <stdio.h>
#include <string.h>

#define TOOL(name, fn) int fn(int argc, char **argv);
#include "tools.h"
#undef TOOL

static const struct {
	const char *name;
	int (*main)(int argc, char **argv);
} tools[] = {
#define TOOL(name, fn) { name, fn },
#include "tools.h"
#undef TOOL
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static int run(const char *name, int argc, char **argv)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (!strcmp(tools[i].name, name))
			return tools[i].main(argc, argv);
	return -1;
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	int rc;

	base = base ? base + 1 : argv[0];
	rc = run(base, argc, argv);
	if (rc >= 0)
		return rc;
	if (argc > 1) {
		rc = run(argv[1], argc - 1, argv + 1);
		if (rc >= 0)
			return rc;
	}
	fprintf(stderr, "dcblab-tools: usage: dcblab-tools NAME [ARGS...], "
		"or run it as NAME; NAME is one of:");
	for (size_t i = 0; i < NTOOLS; i++)
		fprintf(stderr, " %s", tools[i].name);
	fprintf(stderr, "\n");
	return 2;
}
