/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The processes of a `dlock run` job (job.h). A stop reaches the command's
 * process group and also every process that left it (setsid, a daemon's
 * double fork): dlock is their subreaper, so they descend from dlock, and
 * /proc tells who descends from whom.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "job.h"

int cli_job_adopt_orphans(void)
{
	return prctl(PR_SET_CHILD_SUBREAPER, 1);
}

static void set_env(const cli_job_env *env)
{
	setenv("DLOCK_NAME", env->name, 1);
	setenv("DLOCK_OWNER", env->owner, 1);
	if (env->token != NULL)
		setenv("DLOCK_TOKEN", env->token, 1);
}

pid_t cli_job_spawn(char **argv, const cli_job_env *env)
{
	pid_t parent = getpid(), pid = fork();
	int sig;

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
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(env->caught, sig) == 1)
			signal(sig, SIG_DFL);
	set_env(env);
	execvp(argv[0], argv);
	fprintf(stderr, "dlock: run: cannot execute %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* tcsetpgrp from a background group raises SIGTTOU: blocked meanwhile. */
static int set_foreground(int fd, pid_t pgid)
{
	sigset_t block, old;
	int rc;

	sigemptyset(&block);
	sigaddset(&block, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = tcsetpgrp(fd, pgid);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int cli_job_give_terminal(pid_t job)
{
	int fd = STDIN_FILENO;

	if (!isatty(fd) || tcgetpgrp(fd) != getpgrp())
		return -1;
	return set_foreground(fd, job) < 0 ? -1 : fd;
}

void cli_job_take_terminal_back(int fd, pid_t job)
{
	/* Only from the job: after `bg` the shell has it, and keeps it. */
	if (fd >= 0 && tcgetpgrp(fd) == job)
		set_foreground(fd, getpgrp());
}

/* ---- who descends from dlock ---------------------------------------------- */

typedef struct proc_entry {
	pid_t pid, ppid, pgrp;
	char state; /* R, S, D, T, t, Z... */
} proc_entry;

typedef struct proc_table {
	proc_entry *e;
	size_t n, cap;
} proc_table;

static int read_stat(const char *pid, proc_entry *out, char *state)
{
	char path[64], buf[512], *p;
	int ppid = 0, pgrp = 0, ok = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	/* The command name may hold spaces and parentheses: parse after the last ')'. */
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL &&
			sscanf(p + 1, " %c %d %d", state, &ppid, &pgrp) == 3) {
		out->pid = (pid_t)atoi(pid);
		out->ppid = (pid_t)ppid;
		out->pgrp = (pid_t)pgrp;
		out->state = *state;
		ok = 1;
	}
	fclose(f);
	return ok;
}

static void read_processes(proc_table *t)
{
	struct dirent *d;
	DIR *dir = opendir("/proc");
	char state;

	if (dir == NULL)
		return;
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 256;
			proc_entry *grown = realloc(t->e, cap * sizeof(*grown));

			if (grown == NULL)
				break; /* the group signal still went out */
			t->e = grown;
			t->cap = cap;
		}
		t->n += (size_t)read_stat(d->d_name, &t->e[t->n], &state);
	}
	closedir(dir);
}

static const proc_entry *find_entry(const proc_table *t, pid_t pid)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->e[i].pid == pid)
			return &t->e[i];
	return NULL;
}

static int descends_from(const proc_table *t, const proc_entry *p, pid_t ancestor)
{
	int depth;

	/* Bounded: a table read while processes come and go may hold a cycle. */
	for (depth = 0; p != NULL && depth < 512; depth++) {
		if (p->ppid == ancestor)
			return 1;
		if (p->ppid <= 1)
			return 0;
		p = find_entry(t, p->ppid);
	}
	return 0;
}

int cli_job_signal(pid_t pgid, int sig)
{
	proc_table t = { NULL, 0, 0 };
	pid_t me = getpid();
	int hit = 0;
	size_t i;

	kill(-pgid, sig);
	read_processes(&t);
	/* Those still in the group had theirs: once each. */
	for (i = 0; i < t.n; i++)
		if (t.e[i].pgrp != pgid && descends_from(&t, &t.e[i], me))
			hit += kill(t.e[i].pid, sig) == 0;
	free(t.e);
	return hit;
}

int cli_job_reap(pid_t child, int *status, int *done, int *stopsig)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG | WUNTRACED)) > 0) {
		if (pid != child)
			continue;
		if (WIFSTOPPED(st)) {
			*stopsig = WSTOPSIG(st);
		} else {
			*status = st;
			*done = 1;
		}
	}
	return !(pid < 0 && errno == ECHILD);
}

int cli_job_stop_pending(pid_t pid)
{
	static const int stops[] = { SIGTSTP, SIGTTIN, SIGTTOU };
	char path[64], line[256];
	unsigned long long pending = 0;
	size_t i;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "SigPnd:", 7) == 0 || strncmp(line, "ShdPnd:", 7) == 0)
			pending |= strtoull(line + 7, NULL, 16);
	fclose(f);
	for (i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (pending & (1ULL << (stops[i] - 1)))
			return stops[i];
	return 0;
}

int cli_job_stopped(pid_t pid)
{
	char path[64];
	proc_entry e;
	char state = 0;

	snprintf(path, sizeof(path), "%ld", (long)pid);
	return read_stat(path, &e, &state) && state == 'T';
}

int cli_job_group_stopped(pid_t pgid)
{
	proc_table t = { NULL, 0, 0 };
	int stopped = cli_job_stopped(pgid);
	size_t i;

	if (stopped)
		return 1;
	read_processes(&t);
	for (i = 0; i < t.n && !stopped; i++)
		stopped = t.e[i].pgrp == pgid && (t.e[i].state == 'T' || t.e[i].state == 't');
	free(t.e);
	return stopped;
}
