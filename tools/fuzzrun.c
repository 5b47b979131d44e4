// SPDX-License-Identifier: GPL-2.0
#include "fuzzrun.h"
#include "util.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void fuzz_report_line(const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int printed;
	va_list ap;

	pthread_mutex_lock(&lock);
	if (printed++ < FUZZ_PRINTED) {
		fprintf(stderr, "%s: ", progname);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	} else if (printed == FUZZ_PRINTED + 1) {
		fprintf(stderr, "%s: (more problems: counted, not printed)\n",
			progname);
	}
	pthread_mutex_unlock(&lock);
}

int fuzz_parse_churn(const char *arg, const char *const *names, int n,
		     bool *on)
{
	char list[64], known[128] = "", *save = NULL;

	memset(on, 0, n * sizeof(*on));
	if (!strcmp(arg, "none"))
		return 0;
	if (strlen(arg) >= sizeof(list))
		goto bad;
	strcpy(list, arg);
	for (char *w = strtok_r(list, ",", &save); w;
	     w = strtok_r(NULL, ",", &save)) {
		int i = 0;

		while (i < n && strcmp(w, names[i]))
			i++;
		if (i == n)
			goto bad;
		on[i] = true;
	}
	return 0;
bad:
	for (int i = 0; i < n; i++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known),
			 "%s, ", names[i]);
	return usage_error("--churn '%s' is not a comma list of %sor none",
			   arg, known);
}

static void stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

void fuzz_begin(bool seed_set, uint64_t *seed)
{
	sigset_t set;

	if (!seed_set)
		*seed = (uint64_t)(now() * 1e9) ^ (uint64_t)getpid() << 32;
	/* Threads and children inherit the mask; fuzz_wait() takes them. */
	stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	fprintf(stderr, "%s: seed %llu\n", progname,
		(unsigned long long)*seed);
}

int fuzz_thread_start(struct fuzz_thread *t, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(&t->th, NULL, fn, arg);

	if (err)
		return runtime_error("pthread_create: %s", strerror(err));
	t->started = true;
	return 0;
}

void fuzz_thread_join(struct fuzz_thread *t)
{
	if (t->started)
		pthread_join(t->th, NULL);
	t->started = false;
}

enum fuzz_stop fuzz_wait(double t0, double seconds, atomic_int *done,
			 int workers, int *sig)
{
	sigset_t set;

	stop_signals(&set);
	for (;;) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		int s = sigtimedwait(&set, NULL, &ts);

		if (s > 0) {
			*sig = s;
			return FUZZ_STOP_SIGNAL;
		}
		if (atomic_load(done) == workers)
			return FUZZ_STOP_DONE;
		if (now() - t0 >= seconds)
			return FUZZ_STOP_TIME;
	}
}

const char *fuzz_stop_name(enum fuzz_stop why, const char *done_name)
{
	switch (why) {
	case FUZZ_STOP_DONE:
		return done_name;
	case FUZZ_STOP_TIME:
		return "time";
	case FUZZ_STOP_SIGNAL:
		return "signal";
	}
	return "?";
}
