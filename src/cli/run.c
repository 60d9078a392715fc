/*
 * `dlock run`: hold the lock while a child command runs.
 *
 * One thread, one poll: a self-pipe carries signals (SIGCHLD, and the ones
 * forwarded to the child) and lock-lost notices from the library's
 * background thread. When the lock is lost the child gets SIGTERM, then
 * SIGKILL after the grace period, and dlock exits 70.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/run.h"

/* How often the local hold state is also checked, as a second line of defence. */
#define CHECK_INTERVAL_MS 200

static int wake_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;

	if (write(wake_pipe[1], &b, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

static void on_lost(void *arg)
{
	(void)arg;
	on_signal(0); /* 0 = the lock was lost */
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static int install_handlers(void)
{
	struct sigaction sa;
	size_t i;

	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return -1;
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		if (sigaction(forwarded[i], &sa, NULL) < 0)
			return -1;
	return 0;
}

static pid_t spawn(char **argv, const char *name, const char *owner, const char *token)
{
	pid_t pid = fork();
	size_t i;

	if (pid != 0)
		return pid;
	/* The child: default signal handling, the lock's identity in its environment. */
	signal(SIGCHLD, SIG_DFL);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		signal(forwarded[i], SIG_DFL);
	setenv("DLOCK_NAME", name, 1);
	setenv("DLOCK_OWNER", owner, 1);
	if (token != NULL)
		setenv("DLOCK_TOKEN", token, 1);
	execvp(argv[0], argv);
	fprintf(stderr, "dlock: run: cannot execute %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* The slice of a long wait after which pending signals are looked at. */
#define WAIT_SLICE_MS 200

/*
 * Acquire, but let SIGINT/SIGTERM/SIGHUP/SIGQUIT end a wait: the wait goes
 * in slices, and between them the signal pipe is read. *stopped receives
 * 128+N when a signal ended it (nothing is held then).
 */
static int acquire_interruptibly(cli_target *t, const char *owner, const cli_run_args *a,
		int64_t *validity, int64_t *token, int *stopped)
{
	int64_t deadline = a->wait_ms < 0 ? INT64_MAX : now_ms() + a->wait_ms;
	int rc;

	*stopped = 0;
	for (;;) {
		int64_t left = deadline == INT64_MAX ? WAIT_SLICE_MS : deadline - now_ms();
		unsigned char sigs[64];
		ssize_t n, i;

		if (left < 0)
			left = 0;
		rc = cli_target_acquire(t, owner, left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS,
				a->lease_ms, validity, token);
		if (rc != DLOCK_ENOTACQUIRED || left <= WAIT_SLICE_MS)
			return rc;
		n = read(wake_pipe[0], sigs, sizeof(sigs));
		for (i = 0; i < n; i++) {
			if (sigs[i] == SIGINT || sigs[i] == SIGTERM || sigs[i] == SIGHUP ||
			    sigs[i] == SIGQUIT) {
				fprintf(stderr, "dlock: run: stopped by signal %d while waiting for \"%s\"\n",
						sigs[i], t->name);
				*stopped = 128 + sigs[i];
				return rc;
			}
		}
	}
}

int cli_run(cli_target *t, const cli_config *cfg, const cli_run_args *a)
{
	char owner[128];
	int64_t validity = 0, token = 0, lease_end = INT64_MAX, kill_at = INT64_MAX;
	char token_s[24];
	int rc, status = 0, lost = 0, exited = 0;
	pid_t child;

	cli_target_default_owner(t, owner, sizeof(owner));
	if (install_handlers() < 0) {
		fprintf(stderr, "dlock: run: cannot set up signals: %s\n", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	cli_target_on_lost(t, on_lost, NULL);
	rc = acquire_interruptibly(t, owner, a, &validity, &token, &status);
	if (status != 0)
		return status; /* stopped by a signal while waiting */
	if (rc < 0) {
		fprintf(stderr, "dlock: run: lock \"%s\" not acquired: %s\n", t->name,
				cli_target_errmsg(t));
		return cli_exit_for(rc, cfg);
	}
	/* A leased lock protects the child for its validity only: past that,
	 * someone else may hold it, so the child is stopped like on a loss. */
	if (a->lease_ms > 0)
		lease_end = now_ms() + (validity > 0 ? validity : a->lease_ms);

	snprintf(token_s, sizeof(token_s), "%lld", (long long)token);
	child = spawn(a->argv, t->name, owner, t->fenced ? token_s : NULL);
	if (child < 0) {
		fprintf(stderr, "dlock: run: fork: %s\n", strerror(errno));
		cli_target_release(t, owner);
		return EXIT_UNAVAILABLE;
	}

	while (!exited) {
		int64_t now = now_ms(), until = now + CHECK_INTERVAL_MS;
		struct pollfd p = { wake_pipe[0], POLLIN, 0 };
		unsigned char sigs[64];
		ssize_t n, i;

		if (kill_at < until)
			until = kill_at;
		if (!lost && lease_end < until)
			until = lease_end;
		poll(&p, 1, (int)(until > now ? until - now : 0));
		n = read(wake_pipe[0], sigs, sizeof(sigs));
		for (i = 0; i < n; i++) {
			if (sigs[i] != 0 && sigs[i] != SIGCHLD)
				kill(child, sigs[i]);
		}
		if (waitpid(child, &status, WNOHANG) == child) {
			exited = 1;
			break;
		}
		now = now_ms();
		if (!lost && (cli_target_check(t, owner) != 0 || now >= lease_end)) {
			lost = 1;
			fprintf(stderr, "dlock: run: lock \"%s\" %s while the command ran; "
					"stopping it (SIGTERM, SIGKILL after %lld ms)\n", t->name,
					now >= lease_end ? "reached the end of its lease" : "was lost",
					(long long)a->grace_ms);
			kill(child, SIGTERM);
			kill_at = now + a->grace_ms;
		}
		if (now >= kill_at) {
			kill(child, SIGKILL);
			kill_at = INT64_MAX;
		}
	}

	rc = cli_target_release(t, owner);
	if (rc < 0 && !lost)
		fprintf(stderr, "dlock: run: releasing \"%s\": %s\n", t->name, cli_target_errmsg(t));
	if (lost)
		return EXIT_LOST;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
