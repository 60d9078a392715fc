/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What `dlock run` and `dlock hold` do with each signal (signals.c): every
 * signal whose default action would end dlock is handled, so dlock never
 * dies holding the lock with its job orphaned.
 */
#ifndef DLOCK_CLI_SIGNALS_H
#define DLOCK_CLI_SIGNALS_H

#include <signal.h>

typedef enum cli_signal_role {
	CLI_SIG_DEFAULT, /* left alone: faults (SEGV, ABRT...), and what ends nothing */
	CLI_SIG_STOP,    /* INT, TERM, HUP, QUIT: stop the job (a second one kills) */
	CLI_SIG_PASS,    /* every other ending signal: passed on to the job as is */
	CLI_SIG_IGNORE,  /* PIPE, XFSZ (and TTIN, TTOU with job control): dlock reports
			    the failed write instead; the job gets the default */
	CLI_SIG_SUSPEND, /* TSTP, with job control: the job stops, then dlock */
	CLI_SIG_CONT,    /* CONT, with job control: dlock was continued */
	CLI_SIG_CHILD    /* CHLD: a process of the job changed state */
} cli_signal_role;

/* The role of sig in dlock now (after cli_signals_install/_job_control). */
cli_signal_role cli_signal_role_of(int sig);

/*
 * Catch every ending signal with handler, ignore SIGPIPE and SIGXFSZ, catch
 * SIGCHLD. A signal ignored when dlock started (nohup) stays ignored and
 * is never caught. *changed gets every signal whose disposition dlock set:
 * the command resets them to the default before exec. 0, or -1 with errno.
 */
int cli_signals_install(void (*handler)(int), sigset_t *changed);

/*
 * Job control, once run's job is about to start: SIGTSTP and SIGCONT are
 * caught, SIGTTIN and SIGTTOU ignored (dlock never reads the terminal, and
 * a message of its own must not stop it while its job runs). Added to
 * *changed. 0, or -1 with errno.
 */
int cli_signals_job_control(void (*handler)(int), sigset_t *changed);

/*
 * Stop dlock as a terminal stop would (sig: TSTP, TTIN or TTOU): its whole
 * process group, with sig's default action; returns once continued. The
 * kernel drops it where nothing could continue dlock (an orphaned group):
 * then it returns at once.
 */
void cli_signals_stop_self(int sig);

/* TSTP, TTIN, TTOU: the stops that come from a terminal. */
int cli_signal_is_terminal_stop(int sig);

#endif
