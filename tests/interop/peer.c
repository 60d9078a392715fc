/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redisson peer's C side: a child JVM on two pipes (see peer.h). */
#include "peer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JP_PENDING_MAX 64
#define JP_START_MS 90000 /* a JVM and Redisson on a busy 2-core host */
#define JP_REPLY_MS 30000
/* Lock+unlock cycles of every kind before "ready", so that the wake-ups the
 * tests time are Redisson's steady state, not the JVM loading classes. */
#define JP_WARMUP "200"

struct java_peer {
	pid_t pid;
	int to_fd;
	int from_fd;
	long next_seq;
	char buf[16384];
	size_t len;
	char *pending[JP_PENDING_MAX]; /* replies read while waiting for another */
	int npending;
	char version[64];
};

int64_t jp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pid_t spawn(const char *servers, int64_t watchdog_ms, int *to_fd, int *from_fd)
{
	const char *cp = getenv("DLOCK_REDISSON_CLASSPATH");
	if (!cp || !*cp)
		cr_assert_fail("DLOCK_REDISSON_CLASSPATH is not set: run the interop tests with ctest, "
			       "whose tests/interop/run.sh builds the Java peer with Maven");
	const char *java = getenv("DLOCK_JAVA");
	char wd[32];
	snprintf(wd, sizeof wd, "%" PRId64, watchdog_ms);
	int in[2], out[2];
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* The JVM must not outlive a test that Criterion kills. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execlp(java && *java ? java : "java", "java", "-XX:+UseSerialGC", "-cp", cp,
				"dlock.interop.Peer", "--servers", servers, "--watchdog-ms", wd,
				"--warmup", JP_WARMUP, (char *)NULL);
		fprintf(stderr, "exec java: %s\n", strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to_fd = in[1];
	*from_fd = out[0];
	return pid;
}

/* One line from the JVM before deadline_ns: 1 with *line malloc'd, 0 on timeout. */
static int read_line(java_peer *p, int64_t deadline_ns, char **line)
{
	for (;;) {
		char *nl = memchr(p->buf, '\n', p->len);
		if (nl) {
			size_t n = (size_t)(nl - p->buf);
			*line = strndup(p->buf, n);
			memmove(p->buf, nl + 1, p->len - n - 1);
			p->len -= n + 1;
			return 1;
		}
		int64_t left_ms = (deadline_ns - jp_now_ns()) / 1000000;
		if (left_ms <= 0)
			return 0;
		struct pollfd pfd = { .fd = p->from_fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)(left_ms > 1000 ? 1000 : left_ms));
		if (r < 0 && errno == EINTR)
			continue;
		cr_assert(r >= 0, "poll: %s", strerror(errno));
		if (r == 0)
			continue;
		cr_assert(p->len < sizeof p->buf - 1, "the Java peer sent a line over %zu bytes",
				sizeof p->buf);
		ssize_t got = read(p->from_fd, p->buf + p->len, sizeof p->buf - 1 - p->len);
		if (got < 0 && errno == EINTR)
			continue;
		cr_assert(got > 0,
				"the Java peer (pid %d) exited or closed its output; its stderr "
				"above says why",
				(int)p->pid);
		p->len += (size_t)got;
	}
}

java_peer *jp_start(const char *servers, int64_t watchdog_ms)
{
	java_peer *p = calloc(1, sizeof *p);
	cr_assert_not_null(p);
	p->next_seq = 1;
	p->pid = spawn(servers, watchdog_ms, &p->to_fd, &p->from_fd);
	char *line = NULL;
	if (!read_line(p, jp_now_ns() + (int64_t)JP_START_MS * 1000000, &line))
		cr_assert_fail("the Java peer did not start in %d s", JP_START_MS / 1000);
	cr_assert(strncmp(line, "ready ", 6) == 0, "the Java peer said \"%s\", not ready", line);
	snprintf(p->version, sizeof p->version, "%s", line + 6);
	free(line);
	return p;
}

const char *jp_version(const java_peer *p)
{
	return p->version;
}

void jp_stop(java_peer *p)
{
	if (!p)
		return;
	static const char quit[] = "0 quit\n";
	if (write(p->to_fd, quit, sizeof quit - 1) < 0) {
		/* Already gone: reaped below. */
	}
	close(p->to_fd);
	int status;
	int64_t deadline = jp_now_ns() + (int64_t)10000 * 1000000;
	while (waitpid(p->pid, &status, WNOHANG) == 0) {
		if (jp_now_ns() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			break;
		}
		usleep(20000);
	}
	close(p->from_fd);
	for (int i = 0; i < p->npending; i++)
		free(p->pending[i]);
	free(p);
}

void jp_kill(java_peer *p)
{
	if (!p)
		return;
	int status;
	kill(p->pid, SIGKILL);
	while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
	}
	close(p->to_fd);
	close(p->from_fd);
	for (int i = 0; i < p->npending; i++)
		free(p->pending[i]);
	free(p);
}

long jp_send(java_peer *p, const char *worker, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	long seq = p->next_seq++;
	char line[1200];
	int n = snprintf(line, sizeof line, "%ld %s %s\n", seq, worker, cmd);
	cr_assert(n > 0 && (size_t)n < sizeof line);
	cr_assert_eq(write(p->to_fd, line, (size_t)n), n, "writing to the Java peer: %s",
			strerror(errno));
	return seq;
}

static void parse_reply(const char *line, jp_reply *out)
{
	memset(out, 0, sizeof *out);
	const char *rest = strchr(line, ' ');
	cr_assert_not_null(rest, "malformed reply from the Java peer: %s", line);
	rest++;
	if (strncmp(rest, "err ", 4) == 0) {
		snprintf(out->value, sizeof out->value, "%s", rest + 4);
		return;
	}
	out->ok = 1;
	int got = sscanf(rest, "ok %399s %" SCNd64 " %" SCNd64, out->value, &out->t_start_ns,
			&out->t_end_ns);
	cr_assert_eq(got, 3, "malformed reply from the Java peer: %s", line);
}

static int take_pending(java_peer *p, long seq, jp_reply *out)
{
	for (int i = 0; i < p->npending; i++) {
		if (strtol(p->pending[i], NULL, 10) != seq)
			continue;
		parse_reply(p->pending[i], out);
		free(p->pending[i]);
		p->pending[i] = p->pending[--p->npending];
		return 1;
	}
	return 0;
}

int jp_poll(java_peer *p, long seq, int64_t timeout_ms, jp_reply *out)
{
	int64_t deadline = jp_now_ns() + timeout_ms * 1000000;
	char *line;
	while (!take_pending(p, seq, out)) {
		if (!read_line(p, deadline, &line))
			return 0;
		cr_assert(p->npending < JP_PENDING_MAX,
				"too many unclaimed replies from the Java peer");
		p->pending[p->npending++] = line;
	}
	return 1;
}

void jp_wait(java_peer *p, long seq, jp_reply *out)
{
	if (!jp_poll(p, seq, JP_REPLY_MS, out))
		cr_assert_fail("the Java peer did not answer request %ld in %d s", seq,
				JP_REPLY_MS / 1000);
}

const char *jp_ok(java_peer *p, jp_reply *out, const char *worker, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	jp_wait(p, jp_send(p, worker, "%s", cmd), out);
	cr_assert(out->ok, "Redisson: %s %s: %s", worker, cmd, out->value);
	return out->value;
}
