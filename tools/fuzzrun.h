/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest fuzzers (cgfuzz, dcbfuzz) share: the life of a run.
 *
 * main() calls fuzz_begin() before it starts any thread or child, starts
 * its workers and churners with fuzz_thread_start(), waits in fuzz_wait()
 * and, after setting its stop flag, joins them with fuzz_thread_join().
 * SIGINT, SIGTERM and SIGHUP are blocked in every thread from
 * fuzz_begin() on and taken by fuzz_wait() alone, so a stop signal ends
 * the run through the fuzzer's own clean-up, never in the middle of it.
 */
#ifndef DCBLAB_FUZZRUN_H
#define DCBLAB_FUZZRUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * --churn's value: "none", or a comma list of names[0..n); on[i] is set
 * for each name listed, cleared for the others.  0, or usage_error()'s
 * status.
 */
int fuzz_parse_churn(const char *arg, const char *const *names, int n,
		     bool *on);

/*
 * "PROG: message" on stderr, from any thread, at most FUZZ_PRINTED lines
 * in a run; the next one says that the rest are counted, not printed.
 */
#define FUZZ_PRINTED 20
void fuzz_report_line(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* A thread that fuzz_thread_join() may join only if it was started. */
struct fuzz_thread {
	pthread_t th;
	bool started;
};

/* Why a run ended: its workers were done, its time was up, or a signal. */
enum fuzz_stop { FUZZ_STOP_DONE, FUZZ_STOP_TIME, FUZZ_STOP_SIGNAL };

/*
 * *seed becomes a new one unless seed_set; the stop signals are blocked;
 * "PROG: seed N" goes to stderr first, so that a run that hangs or dies
 * can still be replayed.
 */
void fuzz_begin(bool seed_set, uint64_t *seed);

/* pthread_create(fn, arg); 0, or runtime_error()'s status. */
int fuzz_thread_start(struct fuzz_thread *t, void *(*fn)(void *), void *arg);
void fuzz_thread_join(struct fuzz_thread *t);

/*
 * Until *done reaches workers, seconds have passed since t0 (now()'s
 * clock) or a stop signal came (then *sig is its number).
 */
enum fuzz_stop fuzz_wait(double t0, double seconds, atomic_int *done,
			 int workers, int *sig);

/* "time", "signal", or done_name ("writes", "requests") for DONE. */
const char *fuzz_stop_name(enum fuzz_stop why, const char *done_name);

#endif
