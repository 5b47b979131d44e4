// SPDX-License-Identifier: GPL-2.0
/* Runs every C unit test; `make check` builds and runs it. */
#include "check.h"

int checks_passed, checks_failed;

int main(void)
{
	test_seqtrack();
	test_util();
	printf("%d passed, %d failed\n", checks_passed, checks_failed);
	return checks_failed ? 1 : 0;
}
