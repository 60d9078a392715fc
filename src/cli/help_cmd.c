/* SPDX-License-Identifier: BSD-3-Clause */
/* Each command's own help: `dlock help COMMAND`, `dlock COMMAND --help`. */
#include <string.h>

#include "help.h"

/* clang-format off */
static const char run_help[] =
"Usage: dlock [GLOBAL OPTIONS] run [-s|-x|-c N] [-w DUR] [-l DUR] [--grace DUR]\n"
"             [--fair|--fenced] [--label TEXT] [--metrics-textfile PATH]\n"
"             NAME -- CMD [ARG...]\n"
"\n"
"Take NAME, run CMD, release NAME when CMD and everything it started have\n"
"exited. Options go before NAME.\n"
"\n"
"  -w, --wait DUR     wait at most DUR for the lock (absent: as long as it takes,\n"
"                     woken by the holder's unlock; 0: one attempt). A server\n"
"                     that is down or restarting meanwhile is asked again until\n"
"                     the wait ends, one that never answered for 5 s at most\n"
"                     (then exit 69)\n"
"  -l, --lease DUR    the lock lasts DUR (absent: renewed by the watchdog, every\n"
"                     third of --watchdog, for as long as CMD runs)\n"
"      --grace DUR    SIGTERM this long before SIGKILL when CMD must stop (default\n"
"                     10s, shortened to a third of --watchdog or half of -l)\n"
"  -s, --shared       take NAME as the read half of Redisson's RReadWriteLock:\n"
"                     shared runs hold it together (flock's letters)\n"
"  -x, --exclusive    its write half: an exclusive run holds it alone\n"
"  -c, --permits N    hold one permit of the semaphore NAME of N permits (1 to\n"
"                     2147483647)\n"
"                     (Redisson's RPermitExpirableSemaphore, consul lock -n): at\n"
"                     most N such runs at once, on one node; the first run sets N,\n"
"                     a run with another N is refused (64). Not with -s/-x/--fenced\n"
"      --fair         a fair lock (RFairLock): waiters served in the order they asked\n"
"      --fenced       a fenced lock (RFencedLock): CMD gets DLOCK_TOKEN\n"
"      --label TEXT   name this holder in status and in others' \"not acquired\"\n"
"                     messages: \"TEXT [host pid N (CMD ...)]\"; without it they\n"
"                     still show \"host pid N (CMD ...)\"\n"
"      --metrics-textfile PATH\n"
"                     the lock's figures for node_exporter's textfile collector,\n"
"                     written to PATH (atomically) once held and at exit\n"
"\n"
"CMD never outlives the lock: it gets SIGTERM --grace before the lock's keys\n"
"can expire and SIGKILL just before they can, counted from the last renewal the\n"
"servers confirmed. At the end of a -l lease: exit 124 (as timeout(1)); when\n"
"renewals stop getting through: exit 70. A lock found lost (a force unlock, heard\n"
"at once; gone at a renewal): SIGTERM, SIGKILL after the grace, exit 70.\n"
"CMD runs in a process group of its own (at a terminal, the foreground one);\n"
"stops reach the whole group and every process it started (dlock is their\n"
"subreaper); what CMD left running is stopped before the release. If dlock is\n"
"killed, CMD gets SIGKILL. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 sent to\n"
"dlock are passed on to CMD; a second SIGINT/TERM/HUP/QUIT kills it; signals\n"
"ignored when dlock started (nohup) stay ignored. While waiting, SIGINT/TERM/\n"
"HUP/QUIT end the wait (exit 128+N). CMD sees DLOCK_NAME and DLOCK_OWNER (with\n"
"-c, the permit's id), and with --fenced DLOCK_TOKEN.\n"
"\n"
"Exit status: CMD's own (128+N if killed by signal N); 75 held by others when\n"
"the wait ended (-E N, -q: silently); 69 too few nodes reachable (or replicas,\n"
"with --sync-replicas); 70 the lock was lost or could not be renewed; 124 CMD\n"
"stopped at the end of its -l lease; 65 NAME is not a Redisson/dlock lock (with\n"
"-c, not a semaphore); 64 usage error.\n"
"\n"
"Examples:\n"
"  dlock run nightly-report -- ./report.sh\n"
"  dlock -q -E 0 run -w 0 nightly -- ./nightly.sh     # cron: skip if busy\n"
"  dlock run -w 30s -l 10m backup -- ./backup.sh\n"
"  dlock run -c 4 encoders -- ./encode.sh\n";

static const char acquire_help[] =
"Usage: dlock [GLOBAL OPTIONS] acquire [-s|-x] -l DUR [-w DUR] [--fair|--fenced]\n"
"             --owner OWNER NAME\n"
"\n"
"Take NAME for a lease as OWNER, for shell scripts; release it with release.\n"
"OWNER is used verbatim as the Redisson hash field (e.g. a run child's\n"
"DLOCK_OWNER); acquiring twice with one OWNER re-enters (hold count 2).\n"
"\n"
"  -l, --lease DUR    required: the lock expires by itself after DUR\n"
"  -w, --wait DUR     wait at most DUR for it (default 0: one attempt)\n"
"      --owner OWNER  required: the holder's name\n"
"  -s, -x             the read or write half of a read-write lock\n"
"      --fair         a fair lock (RFairLock)\n"
"      --fenced       a fenced lock: prints only the fencing token\n"
"      --label TEXT   name this holder in status and in others' \"not acquired\"\n"
"                     messages: \"TEXT [host pid N (acquire)]\"; without it they\n"
"                     still show \"host pid N (acquire)\"\n"
"      --metrics-textfile PATH\n"
"                     the lock's figures for node_exporter's textfile collector,\n"
"                     written to PATH (atomically) once held and at exit\n"
"\n"
"Prints `acquired \"NAME\" as OWNER for N ms` (with --fenced: the token).\n"
"Exit status: 0 acquired; 75 held by others (-E N, -q); 69 too few nodes; 65 not\n"
"a lock; 64 usage error.\n"
"\n"
"Example:\n"
"  dlock acquire -l 1m --owner deploy:$$ release-train && ./deploy.sh;\n"
"  dlock release --owner deploy:$$ release-train\n";

static const char release_help[] =
"Usage: dlock [GLOBAL OPTIONS] release [-s|-x] --owner OWNER NAME\n"
"\n"
"Release one hold of OWNER (taken by acquire).\n"
"\n"
"      --owner OWNER  required: the holder acquire named\n"
"  -s, -x             the read or write half of a read-write lock\n"
"\n"
"Exit status: 0 released or decremented; 1 OWNER does not hold NAME; 69 too\n"
"few nodes; 64 usage error.\n";

static const char status_help[] =
"Usage: dlock [GLOBAL OPTIONS] status [--json] NAME\n"
"       dlock [GLOBAL OPTIONS] status --watch [--interval DUR] NAME\n"
"\n"
"Per node: reachable, holders with their hold counts and remaining TTLs (a\n"
"reader's: its longest read hold), and who waits: a fair lock's queue in order,\n"
"with how long each keeps its place; for other locks the clients listening on\n"
"its channel, which a holding run does too, and the dlock waiters sleeping\n"
"until their turn to listen (\"N waiting or watching\").\n"
"Whatever NAME is: a lock; a read-write lock (its mode, its readers or its\n"
"writer <owner>:write); an expirable semaphore (permits used and free, each\n"
"permit's id and remaining lease); a count alone: a semaphore's free permits or\n"
"a latch's count, told apart by whose waiters listen, else said to be either.\n"
"A node that wants a password (NOAUTH) or is not a Redis server is \"unusable\"\n"
"and not counted reachable.\n"
"\n"
"      --json         one JSON object instead of the table\n"
"      --watch        look again every --interval until SIGINT/SIGTERM (exit 0):\n"
"                     on a terminal the table is redrawn; into a pipe or a file,\n"
"                     one line per change (a holder came or went, the waiters,\n"
"                     a node unreachable or reachable again), each starting with\n"
"                     a UTC timestamp and the node; nothing while nothing changes\n"
"      --interval DUR how often --watch looks (default 1s)\n"
"\n"
"Exit status: 0 when every node that answered answered well and a quorum did.\n";

static const char unlock_help[] =
"Usage: dlock [GLOBAL OPTIONS] unlock --force NAME\n"
"\n"
"Delete NAME on every node, whoever holds it, and wake its waiters. A run or\n"
"hold that held it hears it at once and exits 70.\n"
"\n"
"      --force        required: says you mean it (to release your own hold,\n"
"                     use release --owner)\n";

static const char latch_help[] =
"Usage: dlock [GLOBAL OPTIONS] latch set NAME COUNT\n"
"       dlock [GLOBAL OPTIONS] latch down NAME\n"
"       dlock [GLOBAL OPTIONS] latch count NAME\n"
"       dlock [GLOBAL OPTIONS] latch wait [-w DUR] NAME\n"
"\n"
"Redisson's RCountDownLatch on one node (the same key and messages as Java's):\n"
"set the count if the latch does not exist (exit 1 if it does), count down by\n"
"one (prints the count left; at zero the latch is deleted and every waiter\n"
"wakes), print the count, or wait until it is zero (woken by the message).\n"
"\n"
"  -w, --wait DUR     wait: at most DUR, then exit 75 (-q: silently)\n"
"\n"
"Example:\n"
"  dlock latch set drained 3;  (each worker) dlock latch down drained\n"
"  dlock latch wait -w 1m drained && ./switch-traffic.sh\n";

static const char hold_help[] =
"Usage: dlock [GLOBAL OPTIONS] hold [-s|-x] [-w DUR] [-l DUR] [--fair|--fenced]\n"
"             NAME\n"
"\n"
"Take NAME and hold it until dlock gets SIGINT, SIGTERM, SIGHUP or SIGQUIT, or\n"
"its stdin reaches EOF; then release it and exit 0 (etcdctl lock without a\n"
"command). Once held, dlock prints the owner on a line of its own and, with\n"
"--fenced, the fencing token on a second line, and flushes: a script reads\n"
"them to know it holds the lock. What is written to stdin is read and\n"
"ignored; a stdin that is /dev/null or closed is not watched (then only a\n"
"signal releases).\n"
"\n"
"  -w, --wait DUR     wait at most DUR for the lock (absent: as long as it takes)\n"
"  -l, --lease DUR    the lock lasts DUR (absent: renewed by the watchdog)\n"
"  -s, -x             the read or write half of a read-write lock\n"
"      --fair         a fair lock (RFairLock)\n"
"      --fenced       a fenced lock: the token on line 2\n"
"      --label TEXT   name this holder in status and in others' \"not acquired\"\n"
"                     messages: \"TEXT [host pid N (hold)]\"; without it they\n"
"                     still show \"host pid N (hold)\"\n"
"      --metrics-textfile PATH\n"
"                     the lock's figures for node_exporter's textfile collector,\n"
"                     written to PATH (atomically) once held and at exit\n"
"\n"
"Exit status: 0 released; 75 held by others when the wait ended (-E N, -q);\n"
"70 the lock was lost while held (one line on stderr says why); 124 the -l\n"
"lease ended; 128+N a signal ended the wait; 69, 65, 64 as run.\n"
"\n"
"Example (bash):\n"
"  coproc LOCK { dlock hold deploy; }\n"
"  read -r owner <&\"${LOCK[0]}\"      # held from here on\n"
"  ./deploy.sh\n"
"  exec {LOCK[1]}>&-; wait \"$LOCK_PID\"  # stdin closed: released\n";

static const char wait_help[] =
"Usage: dlock [GLOBAL OPTIONS] wait [-w DUR] NAME\n"
"\n"
"Wait until nobody holds NAME, without taking it: exit 0 at once when it is\n"
"free, else as soon as a look (every 100 ms) finds it free. In RedLock mode,\n"
"free on enough nodes that a quorum cannot hold it.\n"
"\n"
"  -w, --wait DUR     at most DUR (absent: for as long as it takes; 0: one look)\n"
"\n"
"Exit status: 0 free; 75 still held when -w ran out (-E N; -q: silently); 69\n"
"too few nodes; 65 not a lock; 64 usage error.\n"
"\n"
"Example:\n"
"  dlock wait -w 5m nightly && ./after-nightly.sh\n";
/* clang-format on */

static const struct {
	const char *command, *text;
} pages[] = { { "run", run_help }, { "acquire", acquire_help }, { "release", release_help },
	{ "status", status_help }, { "unlock", unlock_help }, { "latch", latch_help },
	{ "hold", hold_help }, { "wait", wait_help } };

int cli_print_command_help(FILE *out, const char *command)
{
	size_t i;

	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		if (strcmp(pages[i].command, command) == 0) {
			fputs(pages[i].text, out);
			fputs("\nGlobal options (-n, -m, -q, -E, --timeout, ...): dlock --help.\n", out);
			return 0;
		}
	return -1;
}
