// SPDX-License-Identifier: GPL-2.0
/*
 * tsc-khz: the build machine's TSC frequency in kHz, measured against
 * CLOCK_MONOTONIC_RAW (median of 5 windows of 50 ms).
 *
 * A TCG guest's RDTSC reads the host's TSC, so this is the frequency of
 * the guests' TSC too. Without it our kernel (no ACPI, so no HPET or PM
 * timer to calibrate against) marks the TSC unstable and keeps time with
 * jiffies, which lose ticks whenever its vCPU thread waits for a core:
 * with four guests on two cores their clocks ran up to ~1.8x slow, and a
 * 10 Mbit/s tbf let 5.5 Mbit/s through by the host's clock. The lab
 * boots TCG guests with tsc_early_khz=<this> tsc=reliable.
 *
 * Runs on the host only (not in the image). Exit 0 with the number on
 * stdout, 1 if the TSC is not usable here, 2 usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define WINDOWS 5
#define WINDOW_NS 50000000LL

static long long ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	double khz[WINDOWS];

	if (argc > 1) {
		int help = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help");

		fprintf(help ? stdout : stderr,
			"usage: tsc-khz\nThis machine's TSC frequency in kHz "
			"(measured against CLOCK_MONOTONIC_RAW).\n");
		return help ? 0 : 2;
	}
	for (int i = 0; i < WINDOWS; i++) {
		long long t0 = ns_now(), t1;
		uint64_t c0 = __rdtsc(), c1;

		do
			t1 = ns_now();
		while (t1 - t0 < WINDOW_NS);
		c1 = __rdtsc();
		khz[i] = (double)(c1 - c0) * 1e6 / (double)(t1 - t0);
	}
	qsort(khz, WINDOWS, sizeof(khz[0]), cmp);
	if (khz[WINDOWS / 2] < 1000.0) {
		fprintf(stderr, "tsc-khz: TSC does not count here\n");
		return 1;
	}
	printf("%.0f\n", khz[WINDOWS / 2]);
	return 0;
}
