/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The processes of a `dlock run` job: the command in a process group of its
 * own, and every process descended from dlock (dlock is a child subreaper, so
 * a process that left the group or lost its parent still descends from it).
 */
#ifndef DLOCK_CLI_JOB_H
#define DLOCK_CLI_JOB_H

#include <signal.h>
#include <sys/types.h>

typedef struct cli_job_env {
	const char *name, *owner;
	const char *token;    /* DLOCK_TOKEN, or NULL */
	const sigset_t *caught; /* dispositions dlock set: the command gets the default */
} cli_job_env;

/* Make dlock the subreaper of its descendants. 0, or -1 with errno. */
int cli_job_adopt_orphans(void);

/* Start argv in a new process group that dies with dlock; the pid, or -1. */
pid_t cli_job_spawn(char **argv, const cli_job_env *env);

/* At a terminal where dlock is in the foreground, the job's group takes it
 * over (it reads the terminal; Ctrl-C reaches it once). The fd, or -1.
 * Taken back for dlock's group only while the job has it. */
int cli_job_give_terminal(pid_t job);
void cli_job_take_terminal_back(int fd, pid_t job);

/* Signal the whole job: the group `pgid` once, and every other process
 * descended from dlock. Returns how many processes outside the group got it. */
int cli_job_signal(pid_t pgid, int sig);

/* Reap what has exited; the command's (`child`) status goes to *status and
 * *done is set; a stop of the command sets *stopsig to the signal that
 * stopped it. 1 while any process of the job is left. */
int cli_job_reap(pid_t child, int *status, int *done, int *stopsig);

/* 1 when pid is stopped now (a stop signal, Ctrl-Z). */
int cli_job_stopped(pid_t pid);

/* 1 when the job's group is stopped: its leader, or any process of it (a
 * shell stopped while it waits in vfork for a child stays in D, and only
 * the child shows the stop). */
int cli_job_group_stopped(pid_t pgid);

/* The terminal stop (SIGTSTP, SIGTTIN, SIGTTOU) pending on pid, or 0: one
 * it cannot act on yet, as a shell waiting in vfork for a child that the
 * same Ctrl-Z stopped before its exec. */
int cli_job_stop_pending(pid_t pid);

#endif
