/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock run`: hold the lock while a command - the whole job it starts -
 * runs.
 *
 * The job. The command runs in a process group of its own, so a stop
 * reaches every process of the job (`sh -c 'a | b'`, a script's background
 * jobs), not just the shell. dlock is also a child subreaper: processes of
 * the job whose parent exits are re-parented to dlock, not to init, so a
 * process that left the group (setsid, a daemon's double fork) is still
 * known, stopped with the rest and waited for. The lock is released only
 * when no process of the job is left. If dlock itself is killed, the
 * command gets SIGKILL (PR_SET_PDEATHSIG); what it started in turn is then
 * re-parented to init and is not stopped - the lock's key expires within
 * the watchdog timeout, so keep the job in the command's process.
 *
 * Signals. One thread, one poll: a self-pipe carries signals and lock-lost
 * notices from the library's background thread. SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1 and SIGUSR2 sent to dlock are passed on to the job's
 * process group, once. At a terminal the job's group is made the foreground
 * group, so Ctrl-C reaches it directly (once) and it can read the terminal.
 * A signal ignored when dlock started (nohup) stays ignored, in dlock and
 * in the command.
 *
 * The wait. The acquire runs on a second thread with the whole wait (the
 * library waits on pub/sub); a stop signal cancels it
 * (dlock_client_cancel_waits), and whatever it may have taken is released
 * before dlock exits with 128+N.
 *
 * Loss. When the lock is lost (the watchdog finds it gone, or a leased
 * lock's validity runs out) the job gets SIGTERM, SIGKILL after the grace
 * period, and dlock exits 70. A leased lock's job is stopped before the
 * validity ends: SIGTERM at its end minus the grace (at most half the
 * validity), SIGKILL at its end. A lock found lost at release is exit 70
 * too, whatever the command returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

/* How often the local hold state is also checked, as a second line of defence. */
#define CHECK_INTERVAL_MS 200
/* Pipe bytes that are not signal numbers. */
#define NOTE_LOST 0
#define NOTE_ACQUIRED 255

static int wake_pipe[2] = { -1, -1 };
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
static int ignored[65]; /* signals the caller had ignored (nohup): left alone */

static void note(unsigned char b)
{
	int saved = errno;

	if (write(wake_pipe[1], &b, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

static void on_signal(int sig)
{
	note((unsigned char)sig);
}

static void on_lost(void *arg)
{
	(void)arg;
	note(NOTE_LOST);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_stop_signal(int sig)
{
	return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

static int install_handlers(void)
{
	struct sigaction sa, old;
	size_t i;

	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return -1;
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
			ignored[forwarded[i]] = 1;
			continue;
		}
		if (sigaction(forwarded[i], &sa, NULL) < 0)
			return -1;
	}
	/* Orphans of the job come to dlock, which stops and waits for them. */
	return prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 ? -1 : 0;
}

/* Read what the pipe has: the first stop signal (or 0), and whether the lock was lost. */
typedef struct notes {
	int stop; /* a stop signal for dlock (128+N is its exit status) */
	int lost;
	int acquired;   /* the acquire thread is done */
	int pass_on[8]; /* signals to forward to the job, in order */
	int npass;
} notes;

static void read_notes(notes *n)
{
	unsigned char buf[64];
	ssize_t got, i;

	while ((got = read(wake_pipe[0], buf, sizeof(buf))) > 0) {
		for (i = 0; i < got; i++) {
			int b = buf[i];

			if (b == NOTE_LOST)
				n->lost = 1;
			else if (b == NOTE_ACQUIRED)
				n->acquired = 1;
			else if (b == SIGCHLD)
				continue;
			else if (n->npass < 8)
				n->pass_on[n->npass++] = b;
			if (b != NOTE_LOST && b != NOTE_ACQUIRED && is_stop_signal(b) &&
					n->stop == 0)
				n->stop = b;
		}
	}
}

static void wait_note(int64_t ms)
{
	struct pollfd p = { wake_pipe[0], POLLIN, 0 };

	poll(&p, 1, ms < 0 ? -1 : (int)(ms > 60000 ? 60000 : ms));
}

/* ---- the acquire, cancellable ---------------------------------------------- */

typedef struct acquire_job {
	cli_target *t;
	const char *owner;
	int64_t wait_ms, lease_ms;
	int64_t validity, token;
	int rc;
} acquire_job;

static void *acquire_main(void *arg)
{
	acquire_job *j = arg;

	j->rc = cli_target_acquire(
			j->t, j->owner, j->wait_ms, j->lease_ms, &j->validity, &j->token);
	note(NOTE_ACQUIRED);
	return NULL;
}

/*
 * Acquire with the whole wait; a stop signal cancels it. Returns the
 * acquire's result, or 128+N when a signal ended the wait (then nothing is
 * held: a hold the acquire got meanwhile is released).
 */
static int acquire_interruptibly(cli_target *t, const char *owner, const cli_run_args *a,
		int64_t *validity, int64_t *token)
{
	acquire_job j = { t, owner, a->wait_ms, a->lease_ms, 0, 0, 0 };
	notes n = { 0 };
	pthread_t th;
	int rc;

	/* One attempt first: a failure no wait heals ends here. Servers that
	 * are down are tried again silently: one that never answered for
	 * CLI_FIRST_CONTACT_MS at most, then one line says which and why. */
	rc = cli_target_acquire(t, owner, 0, a->lease_ms, validity, token);
	if (rc == 0 || a->wait_ms == 0 ||
			(rc != DLOCK_ENOTACQUIRED && rc != DLOCK_ENOQUORUM && rc != DLOCK_ECONN &&
					rc != DLOCK_ETIMEDOUT))
		return rc;
	if (pthread_create(&th, NULL, acquire_main, &j) != 0) {
		acquire_main(&j); /* no thread: wait without being interruptible */
		read_notes(&n);
	} else {
		while (!n.acquired) {
			wait_note(-1);
			read_notes(&n);
			if (n.stop != 0)
				cli_target_cancel(t); /* the acquire returns DLOCK_ECANCELED */
		}
		pthread_join(th, NULL);
	}
	if (n.stop == 0) {
		*validity = j.validity;
		*token = j.token;
		return j.rc;
	}
	fprintf(stderr, "dlock: run: stopped by signal %d while waiting for \"%s\"\n", n.stop,
			t->name);
	if (j.rc == 0)
		cli_target_release(t, owner);
	return 128 + n.stop;
}

/* ---- the job ------------------------------------------------------------------ */

static pid_t spawn(char **argv, const char *name, const char *owner, const char *token)
{
	pid_t parent = getpid(), pid = fork();
	size_t i;

	if (pid != 0) {
		if (pid > 0)
			setpgid(pid, pid); /* also done by the child: whichever runs first */
		return pid;
	}
	/* The child: its own process group; killed if dlock dies (and if dlock
	 * died before this line, it is gone already: do not run unlocked). */
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(70);
	signal(SIGCHLD, SIG_DFL);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		if (!ignored[forwarded[i]])
			signal(forwarded[i], SIG_DFL);
	setenv("DLOCK_NAME", name, 1);
	setenv("DLOCK_OWNER", owner, 1);
	if (token != NULL)
		setenv("DLOCK_TOKEN", token, 1);
	execvp(argv[0], argv);
	fprintf(stderr, "dlock: run: cannot execute %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* At a terminal where dlock is in the foreground, the job takes it over:
 * it reads the terminal, and Ctrl-C goes to it (once). Returns the fd, or -1. */
static int give_terminal(pid_t job)
{
	sigset_t block, old;
	int fd = STDIN_FILENO;

	if (!isatty(fd) || tcgetpgrp(fd) != getpgrp())
		return -1;
	/* A background process changing the foreground group gets SIGTTOU. */
	sigemptyset(&block);
	sigaddset(&block, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (tcsetpgrp(fd, job) < 0)
		fd = -1;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return fd;
}

static void take_terminal_back(int fd)
{
	sigset_t block, old;

	if (fd < 0)
		return;
	sigemptyset(&block);
	sigaddset(&block, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	tcsetpgrp(fd, getpgrp());
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Signal the whole job: its process group, and the processes that left it
 * but were re-parented to dlock (the subreaper). */
static void signal_job(pid_t pgid, int sig)
{
	char path[300], buf[512], *p;
	struct dirent *d;
	DIR *dir;
	pid_t me = getpid();

	kill(-pgid, sig);
	dir = opendir("/proc");
	if (dir == NULL)
		return;
	while ((d = readdir(dir)) != NULL) {
		FILE *f;
		int ppid = 0, pgrp = 0;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		/* Those still in the group had theirs: once each. */
		if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL &&
				sscanf(p + 1, " %*c %d %d", &ppid, &pgrp) == 2 && ppid == me &&
				pgrp != pgid)
			kill((pid_t)atoi(d->d_name), sig);
		fclose(f);
	}
	closedir(dir);
}

/* Reap what has exited; the command's status goes to *status. 1 while any
 * process of the job is left (dlock's children, the re-parented included). */
static int reap(pid_t child, int *status, int *child_done)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid == child) {
			*status = st;
			*child_done = 1;
		}
	}
	return !(pid < 0 && errno == ECHILD);
}

typedef struct job_state {
	pid_t pid;
	int status, done, lost, stopping;
	int64_t term_at, kill_at; /* the next SIGTERM / SIGKILL to the job (INT64_MAX: none) */
} job_state;

/* Stop the job: SIGTERM now, SIGKILL after the grace (or at `kill_by`, if sooner). */
static void stop_job(job_state *j, int64_t grace_ms, int64_t kill_by)
{
	int64_t now = now_ms();

	if (j->stopping)
		return;
	j->stopping = 1;
	signal_job(j->pid, SIGTERM);
	j->term_at = INT64_MAX;
	j->kill_at = now + grace_ms < kill_by ? now + grace_ms : kill_by;
}

/*
 * Run the job until none of it is left, stopping it when the lock is lost,
 * when the lease is about to end, or when dlock is told to stop.
 */
static void supervise(cli_target *t, const char *owner, const cli_run_args *a, job_state *j,
		int64_t lease_end)
{
	for (;;) {
		int64_t now = now_ms(), until = now + CHECK_INTERVAL_MS;
		notes n = { 0 };
		int i, left;

		if (j->term_at < until)
			until = j->term_at;
		if (j->kill_at < until)
			until = j->kill_at;
		wait_note(until > now ? until - now : 0);
		read_notes(&n);
		for (i = 0; i < n.npass; i++)
			if (!ignored[n.pass_on[i]])
				signal_job(j->pid, n.pass_on[i]);
		left = reap(j->pid, &j->status, &j->done);
		if (!left)
			return;
		now = now_ms();
		if (!j->lost && (n.lost || cli_target_check(t, owner) != 0)) {
			j->lost = 1;
			fprintf(stderr,
					"dlock: run: lock \"%s\" was lost while the command ran; "
					"stopping it (SIGTERM, SIGKILL after %lld ms)\n",
					t->name, (long long)a->grace_ms);
			stop_job(j, a->grace_ms, INT64_MAX);
		}
		if (!j->stopping && now >= j->term_at) {
			j->lost = 1;
			fprintf(stderr,
					"dlock: run: lock \"%s\" reaches the end of its lease in "
					"%lld ms; stopping the command (SIGTERM, SIGKILL then)\n",
					t->name, (long long)(lease_end - now));
			stop_job(j, a->grace_ms, lease_end);
		}
		/* The command is done; whatever it left running is stopped too. */
		if (j->done && !j->stopping)
			stop_job(j, a->grace_ms, INT64_MAX);
		if (now >= j->kill_at) {
			signal_job(j->pid, SIGKILL);
			j->kill_at = INT64_MAX;
		}
	}
}

int cli_run(cli_target *t, const cli_config *cfg, const cli_run_args *a)
{
	char owner[128], token_s[24];
	int64_t validity = 0, token = 0, lease_end = INT64_MAX;
	job_state j = { 0, 0, 0, 0, 0, INT64_MAX, INT64_MAX };
	int rc, tty;

	cli_target_default_owner(t, owner, sizeof(owner));
	if (install_handlers() < 0) {
		fprintf(stderr, "dlock: run: cannot set up signals: %s\n", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	cli_target_on_lost(t, on_lost, NULL);
	rc = acquire_interruptibly(t, owner, a, &validity, &token);
	if (rc > 0)
		return rc; /* stopped by a signal while waiting */
	if (rc < 0) {
		cli_report_failure("run", t, rc);
		return cli_exit_for(rc, cfg);
	}
	/* A leased lock protects the job for its validity only: past that,
	 * someone else may hold it, so the job is stopped before it ends. */
	if (a->lease_ms > 0) {
		int64_t valid = validity > 0 ? validity : a->lease_ms;
		int64_t grace = a->grace_ms < valid / 2 ? a->grace_ms : valid / 2;

		lease_end = now_ms() + valid;
		j.term_at = lease_end - grace;
	}

	snprintf(token_s, sizeof(token_s), "%lld", (long long)token);
	j.pid = spawn(a->argv, t->name, owner, t->fenced ? token_s : NULL);
	if (j.pid < 0) {
		fprintf(stderr, "dlock: run: fork: %s\n", strerror(errno));
		cli_target_release(t, owner);
		return EXIT_UNAVAILABLE;
	}
	tty = give_terminal(j.pid);
	supervise(t, owner, a, &j, lease_end);
	take_terminal_back(tty);

	rc = cli_target_release(t, owner);
	if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER) {
		if (!j.lost)
			fprintf(stderr,
					"dlock: run: lock \"%s\" was lost before the command ended "
					"(found at release): %s\n",
					t->name, cli_target_errmsg(t));
		return EXIT_LOST;
	}
	if (rc < 0 && !j.lost)
		fprintf(stderr, "dlock: run: releasing \"%s\": %s\n", t->name,
				cli_target_errmsg(t));
	if (j.lost)
		return EXIT_LOST;
	if (WIFSIGNALED(j.status))
		return 128 + WTERMSIG(j.status);
	return WEXITSTATUS(j.status);
}
