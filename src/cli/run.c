/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock run`: hold the lock while a command - the whole job it starts -
 * runs, and never let the job outlive the lock.
 *
 * The job (job.c). The command runs in a process group of its own, and
 * dlock is the subreaper of everything it starts: a stop reaches the group
 * and every process that left it or lost its parent. The lock is released
 * only when no process of the job is left. If dlock itself is killed, the
 * command gets SIGKILL (PR_SET_PDEATHSIG).
 *
 * Signals (signals.c). One thread, one poll: a self-pipe carries signals and
 * lock-lost notices from the library's background thread. Every signal
 * whose default would end dlock is handled. SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT sent to dlock are passed on to the job, once, then SIGCONT (a
 * stopped job could not act on them), and SIGKILL after the grace if the
 * job was stopped; a second one kills the job (SIGKILL). The other ending
 * signals (SIGUSR1/2, SIGALRM, real-time...) are passed on as they are.
 * SIGPIPE and SIGXFSZ are ignored: dlock's writes fail instead. At a
 * terminal the job's group is made the foreground group, so Ctrl-C reaches
 * it directly (once). A signal ignored when dlock started (nohup) stays
 * ignored, in dlock and in the command; the others reach the command at
 * their default.
 *
 * Job control, as flock's (follow_stop, after_suspension). A job stopped
 * from the terminal (Ctrl-Z) stops dlock's process group too, so the shell
 * prompts again; continued (fg, bg), dlock looks at the lock before the
 * job runs again: one lost meanwhile - nothing renewed it - kills the job
 * where it stands (70).
 *
 * The wait. The acquire runs on a second thread with the whole wait (the
 * library waits on pub/sub); a stop signal cancels it, and whatever it may
 * have taken is released before dlock exits with 128+N.
 *
 * The stop. The library knows when the lock's keys can expire at the
 * earliest: the last renewal (or the acquire) that reached the servers plus
 * the TTL, less drift (dlock_*_validity). The job gets SIGTERM `grace`
 * before that and SIGKILL `margin` before it, so it is gone before the keys
 * can be - whether a lease runs out (exit 124, as timeout(1)) or renewals
 * stop getting through (exit 70). The grace is shortened to fit: at most a
 * third of the watchdog timeout (renewals come every third) or half the
 * lease. A lock found lost (deleted by a force unlock, which the holder
 * hears on the lock's channel; gone at a renewal) stops the job the same
 * way with the grace counted from then, exit 70; so does one found lost at
 * release, whatever the command returned.
 *
 * A permit (run -c N) is held the same way: the target (target_permit.c)
 * gives its validity and its loss, and everything above applies to it; a
 * force unlock gives the permits back and publishes on the semaphore's
 * channel, where the holder listens. A permit removed without a message
 * is found lost at its next renewal (every third of the watchdog timeout).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job.h"
#include "metrics.h"
#include "run.h"
#include "signals.h"

/* How often the lock's validity is looked at while nothing else happens. */
#define CHECK_INTERVAL_MS 200
/* While killing: how soon a late orphan (re-parented to dlock) is killed too. */
#define KILL_POLL_MS 20
/* Continued after a suspension: how often a renewal is looked for. */
#define RESUME_POLL_MS 20
/* SIGKILL a tenth of the TTL before the keys can expire, at most this long:
 * room for a busy machine to run dlock late and still kill in time. */
#define KILL_MARGIN_MS 1000
/* Pipe bytes that are not signal numbers. */
#define NOTE_LOST 0
#define NOTE_ACQUIRED 255
/* A stop at the end of a lease: timeout(1)'s status. */
#define EXIT_LEASE_END 124

/* Signals passed on from one pass of the loop (more wait for the next). */
#define MAX_PASS 16

static int wake_pipe[2] = { -1, -1 };
static sigset_t caught; /* dlock's dispositions, which the command must not inherit */
static volatile sig_atomic_t lost_reason; /* dlock_lost_reason of the last loss */

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

static void on_lost(int reason, void *arg)
{
	(void)arg;
	lost_reason = reason;
	note(NOTE_LOST);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int install_handlers(void)
{
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	if (cli_signals_install(on_signal, &caught) < 0)
		return -1;
	/* Orphans of the job come to dlock, which stops and waits for them. */
	return cli_job_adopt_orphans();
}

/* What the pipe had: signals (in order), stop signals, a loss, the acquire done. */
typedef struct notes {
	int end;   /* the first signal that ends a wait or a hold (128+N: the status) */
	int stop;  /* the first stop signal */
	int nstop; /* how many stop signals */
	int lost;
	int acquired;          /* the acquire thread is done */
	int suspend;           /* SIGTSTP: the job is to stop, then dlock */
	int pass_on[MAX_PASS]; /* signals to forward to the job, in order */
	int npass;
} notes;

static void read_note(notes *n, int b)
{
	cli_signal_role role = cli_signal_role_of(b);

	if (b == NOTE_LOST) {
		n->lost = 1;
		return;
	}
	if (b == NOTE_ACQUIRED) {
		n->acquired = 1;
		return;
	}
	if (role == CLI_SIG_SUSPEND)
		n->suspend = 1;
	if (role != CLI_SIG_STOP && role != CLI_SIG_PASS)
		return; /* SIGCHLD, SIGCONT: only a wake-up */
	if (n->npass < MAX_PASS)
		n->pass_on[n->npass++] = b;
	if (n->end == 0)
		n->end = b;
	if (role == CLI_SIG_STOP) {
		n->nstop++;
		if (n->stop == 0)
			n->stop = b;
	}
}

static void read_notes(notes *n)
{
	unsigned char buf[64];
	ssize_t got, i;

	while ((got = read(wake_pipe[0], buf, sizeof(buf))) > 0)
		for (i = 0; i < got; i++)
			read_note(n, buf[i]);
}

static void wait_note(int64_t ms)
{
	struct pollfd p = { wake_pipe[0], POLLIN, 0 };

	poll(&p, 1, ms < 0 ? -1 : (int)(ms > 60000 ? 60000 : ms));
}

/* ---- for hold.c: the same signals, notes and acquire --------------------------- */

int cli_run_signals(cli_target *t)
{
	if (install_handlers() < 0)
		return -1;
	cli_target_on_lost(t, on_lost, NULL);
	return 0;
}

int cli_run_wake_fd(void)
{
	return wake_pipe[0];
}

void cli_run_notes(int *stop, int *lost, int *reason)
{
	notes n = { 0 };

	read_notes(&n);
	*stop = n.end;
	*lost = n.lost;
	*reason = lost_reason;
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
int cli_run_acquire(cli_target *t, const char *command, const char *owner,
		const cli_run_args *a, int64_t *validity, int64_t *token)
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
			if (n.end != 0)
				cli_target_cancel(t); /* the acquire returns DLOCK_ECANCELED */
		}
		pthread_join(th, NULL);
	}
	if (n.end == 0) {
		*validity = j.validity;
		*token = j.token;
		return j.rc;
	}
	fprintf(stderr, "dlock: %s: stopped by signal %d while waiting for \"%s\"\n", command,
			n.end, t->name);
	if (j.rc == 0)
		cli_target_release(t, owner);
	return 128 + n.end;
}

/* ---- when the job must stop ------------------------------------------------- */

typedef enum stop_reason {
	STOP_NONE,
	STOP_LEFTOVERS, /* the command exited; what it left running goes too */
	STOP_LOST,      /* the lock was found lost */
	STOP_RENEWAL,   /* renewals stopped getting through: the keys can expire */
	STOP_LEASE_END  /* a leased lock reaches its end */
} stop_reason;

/* The lock's times, for the stop schedule. */
typedef struct lock_clock {
	int64_t grace;  /* SIGTERM this long before the SIGKILL, shortened to fit */
	int64_t margin; /* SIGKILL this long before the keys can expire */
	int leased;
} lock_clock;

typedef struct job_state {
	pid_t pid;
	int status, done;
	stop_reason why;
	int stop_signals; /* stop signals sent to dlock while the job ran */
	int killing;      /* SIGKILL to every process of the job, on every pass */
	int64_t kill_at;  /* when killing starts (INT64_MAX: not scheduled) */
	int64_t expiry;   /* the keys can expire from then on (INT64_MAX: lost) */
	int tty;          /* the terminal the job's group was given (-1: none) */
	int stopsig;      /* the command stopped by this signal since the last look */
	int suspend_asked; /* SIGTSTP was passed on: dlock stops when the job does */
	int held;         /* dlock stopped with its job and was continued: the job
			     stays stopped until the lock has been looked at */
} job_state;

static lock_clock clock_for(const cli_config *cfg, const cli_run_args *a)
{
	lock_clock c;
	int64_t ttl = a->lease_ms > 0 ? a->lease_ms : cfg->watchdog_ms;
	/* A renewal is due every third of the watchdog timeout: a stop that
	 * starts sooner than that before the expiry would cut healthy jobs. */
	int64_t fit = a->lease_ms > 0 ? ttl / 2 : ttl / 3;

	c.leased = a->lease_ms > 0;
	c.grace = min64(a->grace_ms, fit);
	c.margin = min64(KILL_MARGIN_MS, ttl / 10);
	return c;
}

/* When the keys can expire at the earliest; INT64_MAX once the lock is lost. */
static int64_t keys_expiry(cli_target *t, const char *owner)
{
	int64_t ms = 0;

	if (cli_target_validity(t, owner, &ms) != 0)
		return INT64_MAX;
	return now_ms() + ms;
}

const char *cli_run_lost_cause(const cli_target *t, int reason)
{
	switch (reason) {
	case DLOCK_LOST_GONE:
		return t->sem != NULL ? "the semaphore no longer has it (given back by unlock "
					"--force, its keys deleted, or its lease passed)"
				      : "its keys were deleted (unlock --force?) or expired";
	case DLOCK_LOST_UNREACHABLE:
		return "no renewal reached the servers in time";
	case DLOCK_LOST_REPLACED:
		return "its key now holds something that is not a lock";
	default:
		return "it is no longer held";
	}
}

static void say_stop(const cli_target *t, const job_state *j, int64_t now)
{
	switch (j->why) {
	case STOP_LOST:
		fprintf(stderr,
				"dlock: run: %s \"%s\" was lost while the command ran: %s; "
				"stopping it (SIGTERM, SIGKILL in %lld ms); exit 70\n",
				cli_target_what(t), t->name, cli_run_lost_cause(t, lost_reason), (long long)(j->kill_at - now));
		break;
	case STOP_RENEWAL:
		fprintf(stderr,
				"dlock: run: %s \"%s\" could not be renewed; %s "
				"in %lld ms: stopping the command (SIGTERM, SIGKILL in %lld ms); "
				"exit 70\n",
				cli_target_what(t), t->name,
				t->sem != NULL ? "its lease can end" : "its keys can expire", (long long)(j->expiry - now), (long long)(j->kill_at - now));
		break;
	case STOP_LEASE_END:
		fprintf(stderr,
				"dlock: run: %s \"%s\" reaches the end of its lease in %lld ms: "
				"stopping the command (SIGTERM, SIGKILL in %lld ms); exit 124\n",
				cli_target_what(t), t->name, (long long)(j->expiry - now), (long long)(j->kill_at - now));
		break;
	default:
		break;
	}
}

/* A stopped job cannot act on a SIGTERM: it is continued after one (as
 * systemd does), unless it is being killed. */
static void continue_job(job_state *j)
{
	if (j->killing)
		return;
	cli_job_signal(j->pid, SIGCONT);
	j->held = 0;
}

/* SIGTERM to the job (once), SIGKILL from kill_at on. A lock reason
 * replaces "leftovers": it decides dlock's exit status. */
static void stop_job(const cli_target *t, job_state *j, stop_reason why, int64_t kill_at)
{
	int64_t now = now_ms();

	if (j->why == STOP_NONE) {
		cli_job_signal(j->pid, SIGTERM);
		continue_job(j);
	}
	if (j->why == STOP_NONE || j->why == STOP_LEFTOVERS) {
		j->why = why;
		j->kill_at = min64(j->kill_at, kill_at);
		say_stop(t, j, now);
	}
}

/* The next moment something is due: a look, the SIGTERM, the SIGKILL. */
static int64_t next_wake(const job_state *j, const lock_clock *c, int64_t now)
{
	int64_t step = j->killing ? KILL_POLL_MS : j->held ? RESUME_POLL_MS : CHECK_INTERVAL_MS;
	int64_t at = now + step;

	at = min64(at, j->kill_at);
	if (j->expiry != INT64_MAX) {
		at = min64(at, j->expiry - c->margin);
		if (j->why == STOP_NONE || j->why == STOP_LEFTOVERS)
			at = min64(at, j->expiry - c->margin - c->grace);
	}
	return at > now ? at - now : 0;
}

/*
 * dlock was stopped with its job (Ctrl-Z) and continued: nothing renewed the
 * lock meanwhile. The job runs again only under a lock that still holds:
 * one lost, or about to expire, kills the job where it stands; one whose
 * renewal is overdue is first renewed (the watchdog does it at once), so
 * the job does not resume into its own stop. 1 while the job stays stopped.
 */
static int after_suspension(const cli_target *t, const lock_clock *c, job_state *j,
		const notes *n, int64_t now)
{
	int gone = n->lost || j->expiry == INT64_MAX;
	int fd, leased_out;

	if (gone || now >= j->expiry - c->margin) {
		leased_out = c->leased && !gone;
		j->why = leased_out ? STOP_LEASE_END : STOP_LOST;
		j->killing = 1;
		j->held = 0;
		fprintf(stderr,
				"dlock: run: %s \"%s\" %s while dlock was stopped: killing the "
				"command (SIGKILL); exit %d\n",
				cli_target_what(t), t->name,
				leased_out ? "reached the end of its lease" : "was lost",
				leased_out ? EXIT_LEASE_END : EXIT_LOST);
		return 0;
	}
	if (!c->leased && now >= j->expiry - c->margin - c->grace)
		return 1;
	j->held = 0;
	if ((fd = cli_job_give_terminal(j->pid)) >= 0) /* `fg`, not `bg` */
		j->tty = fd;
	cli_job_signal(j->pid, SIGCONT);
	return 0;
}

/* Decide, from the lock's state and what happened, what the job gets now. */
static void judge(cli_target *t, const char *owner, const lock_clock *c, job_state *j,
		const notes *n)
{
	int64_t now;

	j->expiry = keys_expiry(t, owner);
	now = now_ms();
	j->stop_signals += n->nstop;
	if (j->stop_signals >= 2 && !j->killing) {
		fprintf(stderr, "dlock: run: a second stop signal: killing the command (SIGKILL)\n");
		j->killing = 1;
	}
	if (j->held && !j->killing && after_suspension(t, c, j, n, now))
		return; /* stopped, waiting for a renewal */
	if (n->lost || j->expiry == INT64_MAX)
		stop_job(t, j, STOP_LOST, now + c->grace);
	else if (now >= j->expiry - c->margin - c->grace)
		stop_job(t, j, c->leased ? STOP_LEASE_END : STOP_RENEWAL, j->expiry - c->margin);
	if (j->done && j->why == STOP_NONE)
		stop_job(t, j, STOP_LEFTOVERS, now + c->grace);
	/* Nothing of the job runs past the keys, whatever else it was told. */
	if (now >= j->kill_at || (j->expiry != INT64_MAX && now >= j->expiry - c->margin))
		j->killing = 1;
	if (j->killing)
		cli_job_signal(j->pid, SIGKILL);
}

/*
 * Signals sent to dlock, passed on to the job. A stop signal is followed by
 * SIGCONT; one that found the job stopped also by SIGKILL after the grace:
 * nobody may be there to send a second. SIGTSTP stops the job, then dlock.
 */
static void pass_on(const lock_clock *c, job_state *j, const notes *n)
{
	int i;

	for (i = 0; i < n->npass; i++) {
		int sig = n->pass_on[i], stopped = j->held || cli_job_group_stopped(j->pid);

		cli_job_signal(j->pid, sig);
		if (cli_signal_role_of(sig) != CLI_SIG_STOP)
			continue;
		if (stopped && !j->killing && j->kill_at == INT64_MAX) {
			j->kill_at = now_ms() + c->grace;
			fprintf(stderr,
					"dlock: run: signal %d found the command stopped: "
					"continuing it (SIGCONT), SIGKILL in %lld ms\n",
					sig, (long long)c->grace);
		}
		continue_job(j);
	}
	if (n->suspend && !j->killing) {
		cli_job_signal(j->pid, SIGTSTP);
		j->suspend_asked = 1;
		if (j->held || cli_job_stopped(j->pid))
			j->stopsig = SIGTSTP; /* stopped already: dlock follows at once */
	}
}

/*
 * Job control, as flock(1) has it: a job stopped from the terminal (Ctrl-Z,
 * or reading it in the background) stops dlock's own group too, so the
 * shell sees its job stopped and prompts again. `fg` or `bg` continues
 * dlock, which looks at the lock before it continues the job
 * (after_suspension). A SIGSTOP sent to the job alone is not followed: the
 * job waits, and dlock keeps the lock.
 */
static void follow_stop(job_state *j)
{
	int sig = j->stopsig, pending;

	j->stopsig = 0;
	if (j->killing || j->why != STOP_NONE)
		return;
	/* A Ctrl-Z the command could not act on yet (see cli_job_stop_pending)
	 * is followed too: flock, stopped by the same Ctrl-Z, would be. */
	pending = j->held ? 0 : cli_job_stop_pending(j->pid);
	if (sig == 0)
		sig = pending;
	if (sig == 0 || (!cli_signal_is_terminal_stop(sig) && !j->suspend_asked))
		return;
	if (!j->held && !pending && !cli_job_stopped(j->pid))
		return; /* continued meanwhile */
	j->suspend_asked = 0;
	j->held = 1;
	cli_job_signal(j->pid, SIGSTOP); /* and what left its group */
	cli_job_take_terminal_back(j->tty, j->pid);
	cli_signals_stop_self(cli_signal_is_terminal_stop(sig) ? sig : SIGTSTP);
}

/* Run the job until none of it is left, stopping it as judge() says. */
static void supervise(cli_target *t, const char *owner, const lock_clock *c, job_state *j)
{
	for (;;) {
		notes n = { 0 };

		wait_note(next_wake(j, c, now_ms()));
		read_notes(&n);
		if (!cli_job_reap(j->pid, &j->status, &j->done, &j->stopsig))
			return;
		judge(t, owner, c, j, &n);
		pass_on(c, j, &n);
		follow_stop(j);
	}
}

/* A lease the acquisition used up (a reply that came late) leaves no time
 * to start the command and kill it before the keys can expire: it is not
 * started, and the lock is given back. 1 when so (said, exit 124). */
static int lease_used_up(cli_target *t, const char *owner, const lock_clock *c)
{
	int64_t ms = 0;

	if (!c->leased || (cli_target_validity(t, owner, &ms) == 0 && ms > c->margin))
		return 0;
	fprintf(stderr,
			"dlock: run: %s \"%s\": the acquisition took its -l lease but for %lld ms, "
			"too little to stop the command in time: not started; exit 124\n",
			cli_target_what(t), t->name, (long long)ms);
	cli_target_release(t, owner);
	return 1;
}

/* dlock's status once the job is gone: the release decides whether the
 * lock held to the end. */
static int finish(cli_target *t, const char *owner, const job_state *j)
{
	int rc = cli_target_release(t, owner);
	int lock_reason = j->why == STOP_LOST || j->why == STOP_RENEWAL;

	if (j->why == STOP_LEASE_END)
		return EXIT_LEASE_END;
	if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER) {
		if (!lock_reason)
			fprintf(stderr,
					"dlock: run: %s \"%s\" was lost before the command ended "
					"(found at release): %s\n",
					cli_target_what(t), t->name, cli_target_errmsg(t));
		return EXIT_LOST;
	}
	if (rc < 0 && !lock_reason)
		fprintf(stderr, "dlock: run: releasing \"%s\": %s\n", t->name,
				cli_target_errmsg(t));
	if (lock_reason)
		return EXIT_LOST;
	if (WIFSIGNALED(j->status))
		return 128 + WTERMSIG(j->status);
	return WEXITSTATUS(j->status);
}

int cli_run(cli_target *t, const cli_config *cfg, const cli_run_args *a)
{
	char owner[128], token_s[24];
	int64_t validity = 0, token = 0;
	job_state j = { .why = STOP_NONE, .kill_at = INT64_MAX, .expiry = INT64_MAX, .tty = -1 };
	lock_clock c = clock_for(cfg, a);
	cli_job_env env;
	int rc;

	cli_target_default_owner(t, owner);
	if (install_handlers() < 0) {
		fprintf(stderr, "dlock: run: cannot set up signals: %s\n", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	cli_target_on_lost(t, on_lost, NULL);
	rc = cli_run_acquire(t, "run", owner, a, &validity, &token);
	if (rc > 0)
		return rc; /* stopped by a signal while waiting */
	if (rc < 0) {
		cli_report_failure("run", t, rc);
		return cli_exit_for(rc, cfg);
	}
	if (lease_used_up(t, owner, &c))
		return EXIT_LEASE_END;
	cli_metrics_write(t, cfg->metrics_path); /* and again at exit (main.c) */
	snprintf(token_s, sizeof(token_s), "%lld", (long long)token);
	env.name = t->name;
	env.owner = cli_target_job_owner(t, owner);
	env.token = t->fenced ? token_s : NULL;
	env.caught = &caught;
	if (cli_signals_job_control(on_signal, &caught) < 0) {
		fprintf(stderr, "dlock: run: cannot set up job control: %s; releasing \"%s\"\n",
				strerror(errno), t->name);
		cli_target_release(t, owner);
		return EXIT_UNAVAILABLE;
	}
	j.pid = cli_job_spawn(a->argv, &env);
	if (j.pid < 0) {
		fprintf(stderr, "dlock: run: fork: %s\n", strerror(errno));
		cli_target_release(t, owner);
		return EXIT_UNAVAILABLE;
	}
	j.tty = cli_job_give_terminal(j.pid);
	supervise(t, owner, &c, &j);
	cli_job_take_terminal_back(j.tty, j.pid);
	return finish(t, owner, &j);
}
