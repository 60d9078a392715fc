/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tests whose forked children contend for a lock (fencing, redlock_exclusion):
 * the servers, the files the children share, and the children's prologue.
 * Children call no Criterion or harness function and leave with _exit().
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

/* An empty file at path (the children append to it). */
static int create_empty(const char *path, int flags)
{
	return open(path, flags | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

void dl_procs_start(dl_procs *p, int nservers, const char *dir_template, int with_notes)
{
	memset(p, 0, sizeof *p);
	cr_assert_leq(nservers, DL_PROCS_MAX_SERVERS);
	p->n = nservers;
	cr_assert_eq(rh_servers_start(p->s, nservers, NULL), 0);
	for (int i = 0; i < nservers; i++)
		snprintf(p->uris[i], sizeof p->uris[i], "%s", rh_server_uri(p->s[i]));

	snprintf(p->dir, sizeof p->dir, "%s", dir_template);
	cr_assert_not_null(mkdtemp(p->dir));
	snprintf(p->log_path, sizeof p->log_path, "%s/sections.log", p->dir);
	snprintf(p->counter_path, sizeof p->counter_path, "%s/counter", p->dir);
	if (with_notes)
		snprintf(p->note_path, sizeof p->note_path, "%s/notes.log", p->dir);
	int lfd = create_empty(p->log_path, O_WRONLY);
	int nfd = with_notes ? create_empty(p->note_path, O_WRONLY) : 0;
	p->cfd = create_empty(p->counter_path, O_RDWR);
	cr_assert(lfd >= 0 && nfd >= 0 && p->cfd >= 0);
	int zero = 0;
	cr_assert_eq(pwrite(p->cfd, &zero, sizeof zero, 0), (ssize_t)sizeof zero);
	close(lfd);
	if (with_notes)
		close(nfd);
}

void dl_procs_fork(const dl_procs *p, pid_t *kids, int nkids,
		void (*child)(const dl_procs *p, pid_t parent))
{
	pid_t parent = getpid();

	for (int i = 0; i < nkids; i++) {
		kids[i] = fork();
		cr_assert_geq(kids[i], 0, "fork: %s", strerror(errno));
		if (kids[i] == 0) {
			child(p, parent);
			_exit(9); /* children do not return */
		}
	}
}

void dl_procs_assert_children_ok(
		int running, int counter, const char *first_fail, const int *status, int nkids)
{
	cr_assert_eq(running, 0, "%d child process(es) still running after 110 s (counter %d)",
			running, counter);
	cr_assert_str_empty(first_fail, "a child failed: %s", first_fail);
	for (int i = 0; i < nkids; i++)
		cr_assert(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0,
				"child %d: status 0x%x", i, status[i]);
}

void dl_procs_free(dl_procs *p)
{
	unlink(p->log_path);
	unlink(p->counter_path);
	if (p->note_path[0])
		unlink(p->note_path);
	rmdir(p->dir);
	for (int i = 0; i < p->n; i++)
		rh_server_free(p->s[i]);
}

void dl_child_prologue(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(3); /* the test died before the signal was armed */
}

dlock_redlock *dl_child_redlock(const dl_procs *p, const char *name, const dlock_client_options *co,
		const dlock_redlock_options *ro, int log_fd)
{
	const char *u[DL_PROCS_MAX_SERVERS];
	dlock_redlock *r = NULL;

	for (int i = 0; i < p->n; i++)
		u[i] = p->uris[i];
	int rc = dlock_redlock_new_from_uris(&r, u, (size_t)p->n, name, co, ro);
	if (rc != 0) {
		dl_log_line(log_fd, "F %d open: %s (%s)\n", (int)getpid(), dlock_strerror(rc),
				dlock_errmsg_last());
		_exit(5);
	}
	return r;
}
