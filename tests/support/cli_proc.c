/* SPDX-License-Identifier: BSD-3-Clause */
/* Running the `dlock` command in tests (cli_proc.h). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#ifndef DLOCK_CLI_PATH
#error "DLOCK_CLI_PATH must name the dlock binary (tests/CMakeLists.txt defines it)"
#endif

/* ---- running the CLI ------------------------------------------------------ */

proc *proc_new(void)
{
	proc *p = calloc(1, sizeof *p);
	cr_assert_not_null(p);
	p->fd[0] = p->fd[1] = -1;
	return p;
}

static void proc_describe(proc *p, const char *const *args)
{
	size_t off = (size_t)snprintf(p->desc, sizeof p->desc, "dlock");
	for (size_t i = 0; args[i] != NULL && off < sizeof p->desc; i++)
		off += (size_t)snprintf(p->desc + off, sizeof p->desc - off,
				strchr(args[i], ' ') || args[i][0] == '\0' ? " '%s'" : " %s",
				args[i]);
}

/*
 * Start DLOCK_CLI_PATH with args (NULL-terminated, without argv[0]). env is a
 * NULL-terminated list of "NAME=VALUE" set in the child with setenv (after
 * DLOCK_NODES is cleared), or NULL. stdin is /dev/null.
 */
/* How the next dlock starts: in a process group of its own (as a shell job
 * is), with SIGHUP ignored (as under nohup). */
int g_own_group, g_ignore_hup;
int g_stdin_fd = -1;

void proc_start(proc *p, const char *const *env, const char *const *args)
{
	int out[2], err[2];
	size_t n = 0;

	while (args[n] != NULL)
		n++;
	proc_describe(p, args);
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	p->t0 = rh_now_ms();
	p->pid = fork();
	cr_assert_geq(p->pid, 0, "fork: %s", strerror(errno));
	if (p->pid == 0) {
		char **argv = calloc(n + 2, sizeof *argv);
		sigset_t none;
		int devnull = g_stdin_fd >= 0 ? g_stdin_fd : open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (g_own_group)
			setpgid(0, 0); /* a shell job of its own: signals go to its group */
		signal(SIGHUP, g_ignore_hup ? SIG_IGN : SIG_DFL); /* as nohup */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		if (argv == NULL || devnull < 0 || dup2(devnull, 0) < 0 || dup2(out[1], 1) < 0 ||
				dup2(err[1], 2) < 0)
			_exit(126);
		unsetenv("DLOCK_NODES");
		for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
			char name[256];
			const char *eq = strchr(env[i], '=');
			size_t len = eq ? (size_t)(eq - env[i]) : strlen(env[i]);

			if (len >= sizeof name)
				_exit(126);
			memcpy(name, env[i], len);
			name[len] = '\0';
			setenv(name, eq ? eq + 1 : "", 1);
		}
		argv[0] = (char *)DLOCK_CLI_PATH;
		for (size_t i = 0; i < n; i++)
			argv[i + 1] = (char *)args[i];
		execv(DLOCK_CLI_PATH, argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	p->fd[0] = out[0];
	p->fd[1] = err[0];
	fcntl(p->fd[0], F_SETFL, O_NONBLOCK);
	fcntl(p->fd[1], F_SETFL, O_NONBLOCK);
}

/* Read what is available on stream i; closes it on EOF. */
static void proc_drain(proc *p, int i)
{
	char *buf = i == 0 ? p->out : p->err;
	size_t *len = i == 0 ? &p->out_len : &p->err_len;
	char tmp[4096];

	while (p->fd[i] >= 0) {
		ssize_t r = read(p->fd[i], tmp, sizeof tmp);
		if (r > 0) {
			size_t k = (size_t)r;
			if (k > OUT_MAX - 1 - *len)
				k = OUT_MAX - 1 - *len; /* keep reading, drop the excess */
			memcpy(buf + *len, tmp, k);
			*len += k;
			buf[*len] = '\0';
		} else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(p->fd[i]);
			p->fd[i] = -1;
		} else if (errno == EAGAIN) {
			return;
		}
	}
}

/*
 * Wait for the process to exit, collecting its output; returns the status as
 * a shell reports it. It waits for the process, not for EOF: a grandchild that
 * keeps the pipes open does not stall it. Past timeout_s the process is
 * SIGKILLed and the test fails.
 */
int proc_wait(proc *p, int timeout_s)
{
	int64_t deadline = p->t0 + (int64_t)timeout_s * 1000;
	int st;

	while (!p->done) {
		struct pollfd pf[2];
		nfds_t n = 0;

		for (int i = 0; i < 2; i++)
			if (p->fd[i] >= 0)
				pf[n++] = (struct pollfd){ p->fd[i], POLLIN, 0 };
		if (n > 0)
			poll(pf, n, 5);
		else
			dl_sleep_ms(5);
		proc_drain(p, 0);
		proc_drain(p, 1);
		pid_t w = waitpid(p->pid, &st, WNOHANG);
		cr_assert_neq(w, -1, "waitpid(%s): %s", p->desc, strerror(errno));
		if (w == p->pid) {
			p->t1 = rh_now_ms();
			p->done = 1;
			p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		if (rh_now_ms() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			p->done = 1;
			proc_drain(p, 0);
			proc_drain(p, 1);
			cr_assert_fail("hard timeout: `%s` still running after %d s (killed)\n"
				       "stdout: %s\nstderr: %s",
					p->desc, timeout_s, p->out, p->err);
		}
	}
	proc_drain(p, 0);
	proc_drain(p, 1);
	for (int i = 0; i < 2; i++)
		if (p->fd[i] >= 0) {
			close(p->fd[i]);
			p->fd[i] = -1;
		}
	return p->status;
}

int proc_wait_lines(proc *p, size_t lines, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;

	while (count_char(p->out, '\n') < lines && rh_now_ms() < deadline) {
		struct pollfd pf = { p->fd[0], POLLIN, 0 };

		siginfo_t si;

		if (p->fd[0] < 0)
			break;
		poll(&pf, 1, 5);
		proc_drain(p, 0);
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
				si.si_pid != 0)
			break; /* exited (left for proc_wait to reap) */
	}
	return count_char(p->out, '\n') >= lines ? 0 : -1;
}

int64_t proc_elapsed(const proc *p)
{
	return p->t1 - p->t0;
}

void proc_free(proc *p)
{
	if (p == NULL)
		return;
	if (!p->done && p->pid > 0) {
		int st;
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &st, 0);
	}
	for (int i = 0; i < 2; i++)
		if (p->fd[i] >= 0)
			close(p->fd[i]);
	free(p);
}

/* Run dlock to completion (HARD_TIMEOUT_S); returns a proc to inspect and free. */
proc *dlock_env(const char *const *env, const char *const *args)
{
	proc *p = proc_new();
	proc_start(p, env, args);
	proc_wait(p, HARD_TIMEOUT_S);
	return p;
}

/* Start dlock in the background. */
proc *dlock_bg(const char *const *args)
{
	proc *p = proc_new();
	proc_start(p, NULL, args);
	return p;
}

/* ---- assertions on output -------------------------------------------------- */

size_t count_char(const char *s, char c)
{
	size_t k = 0;
	for (; *s; s++)
		k += *s == c;
	return k;
}

size_t count_str(const char *hay, const char *needle)
{
	size_t k = 0, n = strlen(needle);
	for (const char *q = strstr(hay, needle); q != NULL; q = strstr(q + n, needle))
		k++;
	return k;
}

/* stderr is exactly one non-empty line. */
int one_line(const char *s)
{
	size_t n = strlen(s);
	return n > 1 && s[n - 1] == '\n' && count_char(s, '\n') == 1;
}

/* `word` occurs in `text` with no letter, digit, '-' or '_' on either side. */
int has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *q = strstr(text, word); q != NULL; q = strstr(q + 1, word)) {
		char before = q == text ? ' ' : q[-1], after = q[n];
		if (!isalnum((unsigned char)before) && before != '-' && before != '_' &&
				!isalnum((unsigned char)after) && after != '-' && after != '_')
			return 1;
	}
	return 0;
}

/* "<36-char uuid>:<pid>" with the given pid. */
int owner_matches(const char *owner, pid_t pid)
{
	char want[32];

	if (strlen(owner) < 38)
		return 0;
	for (int i = 0; i < 36; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? owner[i] != '-' : !isxdigit((unsigned char)owner[i]))
			return 0;
	}
	snprintf(want, sizeof want, ":%ld", (long)pid);
	return strcmp(owner + 36, want) == 0;
}

/* A loopback port nobody listens on (bound, then closed). */
int closed_port(void)
{
	struct sockaddr_in a = { 0 };
	socklen_t alen = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	cr_assert_geq(fd, 0);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

void make_tmpdir(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/dlock-cli-XXXXXX");
	cr_assert_not_null(mkdtemp(buf), "mkdtemp: %s", strerror(errno));
}

void pid_job_init(pid_job *j, const char *before, const char *after)
{
	make_tmpdir(j->dir, sizeof j->dir);
	snprintf(j->pidfile, sizeof j->pidfile, "%s/pid", j->dir);
	snprintf(j->script, sizeof j->script, "%secho $$ > %s; %s", before, j->pidfile, after);
}

void remove_tmpdir(const char *dir, const char *const *files)
{
	char path[512];
	for (size_t i = 0; files[i] != NULL; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* Wait (bounded) until path exists and holds a line; returns its number, or -1. */
long wait_for_pidfile(const char *path, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;

	while (rh_now_ms() < deadline) {
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			long v = -1;
			int ok = fscanf(f, "%ld", &v) == 1;
			fclose(f);
			if (ok && v > 0)
				return v;
		}
		dl_sleep_ms(10);
	}
	return -1;
}

int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* 1 once pid is gone (reaped by its parent), within timeout_ms. */
int gone_within(pid_t pid, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;
	for (;;) {
		if (kill(pid, 0) == -1 && errno == ESRCH)
			return 1;
		if (rh_now_ms() >= deadline)
			return 0;
		dl_sleep_ms(10);
	}
}

/* 1 while a process whose command line starts with `mark` runs (zombies aside):
 * "sleep 37.123", not the dlock or sh whose arguments mention it. */
int process_running(const char *mark)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;

	cr_assert_not_null(d);
	while (!found && (e = readdir(d)) != NULL) {
		char path[300], buf[4096], stat[512], *p;
		size_t n;
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		for (size_t i = 0; i < n; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		if (strncmp(buf, mark, strlen(mark)) != 0)
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(stat, sizeof stat, f) != NULL && (p = strrchr(stat, ')')) != NULL)
			found = p[2] != 'Z';
		fclose(f);
	}
	closedir(d);
	return found;
}
