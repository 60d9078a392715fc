/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * run's and hold's signals (signals.h). Signals whose default action ends
 * the process are all handled: the four stop signals end the job (or the
 * hold); the others (USR1/2, ALRM, VTALRM, PROF, IO, PWR, XCPU, STKFLT and
 * the real-time ones) are passed on to the job, which decides; SIGPIPE and
 * SIGXFSZ come from dlock's own writes (a reader gone, a file size limit)
 * and are ignored: the write fails and is reported. The synchronous faults
 * (SEGV, BUS, FPE, ILL, TRAP, SYS) and ABRT are bugs of dlock itself and
 * keep their default: the kernel's PR_SET_PDEATHSIG then kills the job.
 */
#include <string.h>
#include <unistd.h>

#include "signals.h"

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
static const int pass_signals[] = { SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
	SIGPWR, SIGXCPU,
#ifdef SIGSTKFLT
	SIGSTKFLT,
#endif
};
static const int ignored_signals[] = { SIGPIPE, SIGXFSZ };

static unsigned char roles[NSIG]; /* cli_signal_role, by signal number */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

cli_signal_role cli_signal_role_of(int sig)
{
	return sig > 0 && sig < NSIG ? (cli_signal_role)roles[sig] : CLI_SIG_DEFAULT;
}

int cli_signal_is_terminal_stop(int sig)
{
	return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static int was_ignored(int sig)
{
	struct sigaction old;

	return sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
}

/* Give sig the role: handler (or SIG_IGN) in dlock, the default in the command. */
static int take(int sig, cli_signal_role role, void (*handler)(int), sigset_t *changed)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = role == CLI_SIG_IGNORE ? SIG_IGN : handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(sig, &sa, NULL) < 0)
		return -1;
	roles[sig] = (unsigned char)role;
	sigaddset(changed, sig);
	return 0;
}

/* As take(), unless the caller had sig ignored (nohup): then it stays so. */
static int take_unless_ignored(int sig, cli_signal_role role, void (*handler)(int),
		sigset_t *changed)
{
	if (was_ignored(sig))
		return 0;
	return take(sig, role, handler, changed);
}

static int take_all(const int *sigs, size_t n, cli_signal_role role, void (*handler)(int),
		sigset_t *changed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (take_unless_ignored(sigs[i], role, handler, changed) < 0)
			return -1;
	return 0;
}

int cli_signals_install(void (*handler)(int), sigset_t *changed)
{
	int sig;

	sigemptyset(changed);
	if (take(SIGCHLD, CLI_SIG_CHILD, handler, changed) < 0 ||
			take_all(stop_signals, COUNT(stop_signals), CLI_SIG_STOP, handler,
					changed) < 0 ||
			take_all(pass_signals, COUNT(pass_signals), CLI_SIG_PASS, handler,
					changed) < 0 ||
			take_all(ignored_signals, COUNT(ignored_signals), CLI_SIG_IGNORE, handler,
					changed) < 0)
		return -1;
	for (sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		if (take_unless_ignored(sig, CLI_SIG_PASS, handler, changed) < 0)
			return -1;
	return 0;
}

int cli_signals_job_control(void (*handler)(int), sigset_t *changed)
{
	/* SIGCONT is caught even if ignored: it continues dlock all the same. */
	if (take(SIGCONT, CLI_SIG_CONT, handler, changed) < 0 ||
			take_unless_ignored(SIGTSTP, CLI_SIG_SUSPEND, handler, changed) < 0 ||
			take_unless_ignored(SIGTTIN, CLI_SIG_IGNORE, handler, changed) < 0 ||
			take_unless_ignored(SIGTTOU, CLI_SIG_IGNORE, handler, changed) < 0)
		return -1;
	return 0;
}

void cli_signals_stop_self(int sig)
{
	struct sigaction dfl, old;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	if (sigaction(sig, &dfl, &old) < 0)
		return;
	/* The group, as the terminal would: a pipeline's other commands stop too. */
	kill(0, sig);
	sigaction(sig, &old, NULL);
}
