/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: real redis-server processes on free 127.0.0.1 ports.
 * See redis_harness.h for the contract.
 *
 * How a server is started, and why:
 *  - The port comes from binding 127.0.0.1:0 and closing the socket. Another
 *    process (a parallel Criterion test, or any outgoing connection taking an
 *    ephemeral port) may grab it before redis binds, so a start that fails is
 *    retried on a new port.
 *  - Answering PING is not proof that *our* child is listening: the port may
 *    belong to another test's server. The server is ready when our child is
 *    alive, answers PING, and is identified as ours (INFO's process_id equals
 *    our child's pid, or our private log says it is ready to accept
 *    connections).
 *  - The child sets PR_SET_PDEATHSIG=SIGKILL before exec, so it dies with the
 *    thread that forked it, even if the test crashes or is killed.
 *  - Between fork and exec the child only makes async-signal-safe calls; the
 *    test process may have other threads.
 */
#include "redis_harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef REDIS_SERVER_PATH
#define REDIS_SERVER_PATH "redis-server"
#endif

#define RH_READY_TIMEOUT_MS 10000
#define RH_START_ATTEMPTS 5
#define RH_RESTART_ATTEMPTS 5
#define RH_POLL_MS 10
#define RH_CMD_TIMEOUT_MS 1000
#define RH_HOST "127.0.0.1"

struct rh_server {
	int port;
	pid_t pid;       /* 0 when not running */
	pid_t owner;     /* process that started it; only it may kill or clean */
	int dir_removed; /* rh_cleanup_all() removed the directory */
	char dir[PATH_MAX];
	char logpath[PATH_MAX];
	char conf[PATH_MAX]; /* a sentinel's config file ("" for a plain server) */
	char uri[64];
	char **extra;           /* copied NULL-terminated list, may be NULL */
	char *password;         /* value of --requirepass in extra, for rh_command */
	pthread_mutex_t lock;   /* guards ctx */
	redisContext *ctx;      /* cached connection for rh_command */
	rh_server *prev, *next; /* registry */
};

/* ---- process-global state ---------------------------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static rh_server *g_registry;
static char g_server_path[PATH_MAX];
static int g_server_major;   /* 0 when unknown */
static int g_server_version; /* major * 10000 + minor * 100 + patch; 0 when unknown */

static void rh_lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) != 0)
		abort();
}

static void rh_unlock(pthread_mutex_t *m)
{
	if (pthread_mutex_unlock(m) != 0)
		abort();
}

int64_t rh_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rh_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

static struct timeval rh_tv(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	return tv;
}

/*
 * The server to start: $DLOCK_TEST_REDIS_SERVER when set (ci/versions.sh runs
 * the suites against other versions with it), else the one CMake found. A
 * bare program name is resolved on PATH now, so the child can use execv.
 */
static void rh_resolve_path(void)
{
	const char *name = getenv("DLOCK_TEST_REDIS_SERVER");
	if (name == NULL || *name == '\0')
		name = REDIS_SERVER_PATH;
	snprintf(g_server_path, sizeof g_server_path, "%s", name);
	if (strchr(name, '/'))
		return;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *end = strchr(path, ':');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		char cand[PATH_MAX];
		if (len > 0 &&
				snprintf(cand, sizeof cand, "%.*s/%s", (int)len, path, name) <
						(int)sizeof cand &&
				access(cand, X_OK) == 0) {
			snprintf(g_server_path, sizeof g_server_path, "%s", cand);
			return;
		}
		if (!end)
			break;
		path = end + 1;
	}
}

/* Close every descriptor >= 3 except `keep` (async-signal-safe). */
static void rh_child_close_fds(int keep, int maxfd)
{
#ifdef SYS_close_range
	if ((keep <= 3 || syscall(SYS_close_range, 3u, (unsigned)keep - 1u, 0u) == 0) &&
			(keep == INT_MAX ||
					syscall(SYS_close_range, (unsigned)keep + 1u, ~0u, 0u) ==
							0))
		return;
#endif
	for (int fd = 3; fd < maxfd; fd++)
		if (fd != keep)
			close(fd);
}

static int rh_max_fd(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
			rl.rlim_cur < 65536)
		return (int)rl.rlim_cur;
	return 65536;
}

/* The version `redis-server --version` prints ("... v=7.0.15 ...") as
 * 70015 (major * 10000 + minor * 100 + patch); 0 if unknown. */
static int rh_detect_version(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return 0;
	int maxfd = rh_max_fd();
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return 0;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(fds[1], STDOUT_FILENO);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, STDERR_FILENO);
		rh_child_close_fds(INT_MAX, maxfd);
		char *const argv[] = { g_server_path, (char *)"--version", NULL };
		execv(g_server_path, argv);
		_exit(127);
	}
	close(fds[1]);
	char buf[512];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fds[0], buf + len, sizeof buf - 1 - len);
		if (n > 0) {
			len += (size_t)n;
			if (len == sizeof buf - 1)
				break;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			break;
		}
	}
	buf[len] = '\0';
	close(fds[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
	}
	const char *v = strstr(buf, "v=");
	int major = 0, minor = 0, patch = 0;
	if (v == NULL || sscanf(v + 2, "%d.%d.%d", &major, &minor, &patch) < 1)
		return 0;
	return major * 10000 + minor * 100 + patch;
}

static void rh_atexit(void)
{
	rh_cleanup_all();
}

static void rh_remove_dir(const char *dir);

static const char *rh_tmpdir(void)
{
	const char *tmp = getenv("TMPDIR");
	return tmp && *tmp ? tmp : "/tmp";
}

/*
 * A test that crashed or timed out had no chance to remove its directories;
 * their names carry the owner's pid, so remove those whose owner is gone.
 */
static void rh_sweep_stale_dirs(void)
{
	const char *tmp = rh_tmpdir();
	DIR *d = opendir(tmp);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		static const char prefix[] = "dlock-redis-";
		if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0)
			continue;
		char *end;
		long pid = strtol(e->d_name + sizeof prefix - 1, &end, 10);
		if (pid <= 0 || *end != '-' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", tmp, e->d_name) < (int)sizeof path)
			rh_remove_dir(path);
	}
	closedir(d);
}

static void rh_init(void)
{
	rh_resolve_path();
	rh_sweep_stale_dirs();
	g_server_version = rh_detect_version();
	g_server_major = g_server_version / 10000;
	atexit(rh_atexit);
}

static void rh_registry_add(rh_server *s)
{
	rh_lock(&g_registry_lock);
	s->prev = NULL;
	s->next = g_registry;
	if (g_registry)
		g_registry->prev = s;
	g_registry = s;
	rh_unlock(&g_registry_lock);
}

static void rh_registry_remove(rh_server *s)
{
	rh_lock(&g_registry_lock);
	if (s->prev)
		s->prev->next = s->next;
	else if (g_registry == s)
		g_registry = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	rh_unlock(&g_registry_lock);
}

/* ---- files -------------------------------------------------------------- */

static void rh_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			unlinkat(dirfd(d), e->d_name, 0);
		}
		closedir(d);
	}
	rmdir(dir);
}

static off_t rh_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Read the log from `from` (at most the last `cap - 1` bytes) into buf. */
static size_t rh_read_log(const char *path, off_t from, char *buf, size_t cap)
{
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size > from + (off_t)(cap - 1))
		from = size - (off_t)(cap - 1);
	ssize_t n = size > from ? pread(fd, buf, cap - 1, from) : 0;
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	return (size_t)n;
}

static int rh_log_says_ready(const rh_server *s, off_t from)
{
	char buf[8192];
	rh_read_log(s->logpath, from, buf, sizeof buf);
	for (char *p = buf; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return strstr(buf, "ready to accept connections") != NULL;
}

static void rh_report_failure(const rh_server *s, off_t from, const char *what)
{
	char buf[1024];
	rh_read_log(s->logpath, from, buf, sizeof buf);
	fprintf(stderr, "redis_harness: %s (port %d, %s); log tail:\n%s\n", what, s->port,
			s->logpath, buf);
}

/* ---- ports and processes ------------------------------------------------ */

static int rh_pick_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	socklen_t len = sizeof sa;
	int port = -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
			getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

int rh_free_port(void)
{
	return rh_pick_port();
}

/* 1 when port is free on loopback right now. */
static int rh_port_free(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return ok;
}

/*
 * A cluster node without --cluster-port (Redis before 7.0 has none) binds
 * its bus at port + 10000, which does not exist above 55535: pick a port
 * whose bus port is free too.
 */
static int rh_pick_port_with_bus(void)
{
	for (int i = 0; i < 200; i++) {
		int port = rh_pick_port();
		if (port > 0 && port <= 55535 && rh_port_free(port + 10000))
			return port;
	}
	return -1;
}

/* The arguments ask for a cluster node that has no bus port of its own. */
static int rh_needs_bus_port(const char *const *extra)
{
	int cluster = 0;
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
		if (strcmp(extra[i], "--cluster-port") == 0)
			return 0;
		if (strcmp(extra[i], "--cluster-enabled") == 0 && extra[i + 1] != NULL &&
				strcmp(extra[i + 1], "yes") == 0)
			cluster = 1;
	}
	return cluster;
}

/* Reap the child if it has exited; returns 1 if it is gone. */
static int rh_child_exited(rh_server *s, int *status)
{
	pid_t r;
	do {
		r = waitpid(s->pid, status, WNOHANG);
	} while (r < 0 && errno == EINTR);
	if (r == s->pid || (r < 0 && errno == ECHILD)) {
		s->pid = 0;
		return 1;
	}
	return 0;
}

static void rh_kill_and_reap(rh_server *s)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, SIGKILL);
	while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
	}
	s->pid = 0;
}

static void rh_drop_ctx(rh_server *s)
{
	rh_lock(&s->lock);
	if (s->ctx) {
		redisFree(s->ctx);
		s->ctx = NULL;
	}
	rh_unlock(&s->lock);
}

/* fork+exec redis-server on s->port. 0, or -1 (exec failed or fork failed). */
static int rh_spawn(rh_server *s)
{
	char portbuf[16];
	snprintf(portbuf, sizeof portbuf, "%d", s->port);

	size_t nextra = 0;
	while (s->extra && s->extra[nextra])
		nextra++;
	size_t cap = 24 + nextra;
	char **argv = calloc(cap, sizeof *argv);
	if (!argv)
		return -1;
	size_t i = 0;
	argv[i++] = g_server_path;
	if (s->conf[0] != '\0') {
		/* Sentinel mode: the config file (which it rewrites) must come first. */
		argv[i++] = s->conf;
		argv[i++] = (char *)"--sentinel";
	}
	argv[i++] = (char *)"--port";
	argv[i++] = portbuf;
	argv[i++] = (char *)"--bind";
	argv[i++] = (char *)RH_HOST;
	argv[i++] = (char *)"--save";
	argv[i++] = (char *)"";
	argv[i++] = (char *)"--appendonly";
	argv[i++] = (char *)"no";
	argv[i++] = (char *)"--daemonize";
	argv[i++] = (char *)"no";
	argv[i++] = (char *)"--dir";
	argv[i++] = s->dir;
	argv[i++] = (char *)"--logfile";
	argv[i++] = s->logpath;
	argv[i++] = (char *)"--protected-mode";
	argv[i++] = (char *)"no";
	if (g_server_major >= 7) {
		argv[i++] = (char *)"--enable-debug-command";
		argv[i++] = (char *)"yes";
	}
	for (size_t k = 0; k < nextra; k++)
		argv[i++] = s->extra[k];
	argv[i] = NULL;

	int errpipe[2];
	if (pipe2(errpipe, O_CLOEXEC) != 0) {
		free(argv);
		return -1;
	}
	int maxfd = rh_max_fd();
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(errpipe[0]);
		close(errpipe[1]);
		free(argv);
		return -1;
	}
	if (pid == 0) {
		/* Child: async-signal-safe calls only. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127); /* the parent died before the death signal was armed */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int logfd = open(s->logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (logfd < 0)
			logfd = open("/dev/null", O_WRONLY);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		if (logfd >= 0) {
			dup2(logfd, STDOUT_FILENO);
			dup2(logfd, STDERR_FILENO);
		}
		rh_child_close_fds(errpipe[1], maxfd);
		execv(g_server_path, argv);
		int e = errno;
		ssize_t w = write(errpipe[1], &e, sizeof e);
		(void)w;
		_exit(127);
	}
	close(errpipe[1]);
	free(argv);
	int child_errno = 0;
	ssize_t n;
	do {
		n = read(errpipe[0], &child_errno, sizeof child_errno);
	} while (n < 0 && errno == EINTR);
	close(errpipe[0]);
	s->pid = pid;
	if (n == (ssize_t)sizeof child_errno) {
		rh_kill_and_reap(s);
		fprintf(stderr, "redis_harness: cannot exec %s: %s\n", g_server_path,
				strerror(child_errno));
		return -1;
	}
	return 0;
}

static redisContext *rh_connect(int port, int timeout_ms)
{
	redisContext *c = redisConnectWithTimeout(RH_HOST, port, rh_tv(timeout_ms));
	if (!c)
		return NULL;
	if (c->err || redisSetTimeout(c, rh_tv(timeout_ms)) != REDIS_OK) {
		redisFree(c);
		return NULL;
	}
	return c;
}

/* AUTH on a fresh connection when the server was started with --requirepass. */
static int rh_auth(const rh_server *s, redisContext *c)
{
	if (!s->password)
		return 0;
	redisReply *r = redisCommand(c, "AUTH %s", s->password);
	int ok = r && r->type != REDIS_REPLY_ERROR;
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* PID in INFO server's "process_id:" line; 0 if unavailable. */
static long rh_info_pid(redisContext *c)
{
	redisReply *r = redisCommand(c, "INFO server");
	long pid = 0;
	if (r && r->type == REDIS_REPLY_STRING) {
		const char *p = strstr(r->str, "process_id:");
		if (p)
			pid = strtol(p + strlen("process_id:"), NULL, 10);
	}
	if (r)
		freeReplyObject(r);
	return pid;
}

/*
 * Wait until our child answers on s->port. 0 ready; 1 the child exited early
 * (port taken? retry); -1 timeout (child killed).
 */
static int rh_wait_ready(rh_server *s, off_t logfrom)
{
	int64_t deadline = rh_now_ms() + RH_READY_TIMEOUT_MS;
	for (;;) {
		int status;
		if (rh_child_exited(s, &status))
			return 1;
		redisContext *c = rh_connect(s->port, 500);
		if (c) {
			int answered = 0, ours = 0;
			if (rh_auth(s, c) == 0) {
				redisReply *r = redisCommand(c, "PING");
				/* LOADING or similar errors: not ready yet. NOAUTH: it answers. */
				answered = r &&
						((r->type == REDIS_REPLY_STATUS &&
								 strcmp(r->str, "PONG") == 0) ||
								(r->type == REDIS_REPLY_ERROR &&
										strncmp(r->str, "NOAUTH",
												6) ==
												0));
				if (r)
					freeReplyObject(r);
				if (answered)
					ours = rh_info_pid(c) == (long)s->pid ||
							rh_log_says_ready(s, logfrom);
			}
			redisFree(c);
			if (answered && ours && !rh_child_exited(s, &status))
				return 0;
		}
		if (rh_now_ms() >= deadline) {
			rh_report_failure(s, logfrom, "server did not answer within 10 s");
			rh_kill_and_reap(s);
			return -1;
		}
		rh_sleep_ms(RH_POLL_MS);
	}
}

/* ---- public API ---------------------------------------------------------- */

static void rh_server_destroy(rh_server *s)
{
	if (s->extra) {
		for (size_t i = 0; s->extra[i]; i++)
			free(s->extra[i]);
		free(s->extra);
	}
	free(s->password);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int rh_copy_extra(rh_server *s, const char *const *extra)
{
	if (!extra)
		return 0;
	size_t n = 0;
	while (extra[n])
		n++;
	s->extra = calloc(n + 1, sizeof *s->extra);
	if (!s->extra)
		return -1;
	for (size_t i = 0; i < n; i++) {
		s->extra[i] = strdup(extra[i]);
		if (!s->extra[i])
			return -1;
		/* The last --requirepass wins, as in redis. */
		if (strcmp(extra[i], "--requirepass") == 0 && i + 1 < n) {
			free(s->password);
			s->password = strdup(extra[i + 1]);
			if (!s->password)
				return -1;
		}
	}
	return 0;
}

/* Write a sentinel's config file (the lines given) into its directory. */
static int rh_write_conf(rh_server *s, const char *const *lines)
{
	if (snprintf(s->conf, sizeof s->conf, "%s/sentinel.conf", s->dir) >= (int)sizeof s->conf)
		return -1;
	FILE *f = fopen(s->conf, "w");
	if (!f)
		return -1;
	for (size_t i = 0; lines[i] != NULL; i++)
		fprintf(f, "%s\n", lines[i]);
	return fclose(f) == 0 ? 0 : -1;
}

int rh_server_version(void)
{
	pthread_once(&g_once, rh_init);
	return g_server_version;
}

static rh_server *rh_start(const char *const *extra, const char *const *conf_lines)
{
	pthread_once(&g_once, rh_init);

	rh_server *s = calloc(1, sizeof *s);
	if (!s) {
		fprintf(stderr, "redis_harness: out of memory\n");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->owner = getpid();
	if (rh_copy_extra(s, extra) != 0) {
		fprintf(stderr, "redis_harness: out of memory\n");
		rh_server_destroy(s);
		return NULL;
	}
	const char *tmp = rh_tmpdir();
	if (snprintf(s->dir, sizeof s->dir, "%s/dlock-redis-%ld-XXXXXX", tmp, (long)s->owner) >=
					(int)sizeof s->dir ||
			!mkdtemp(s->dir)) {
		fprintf(stderr, "redis_harness: mkdtemp in %s: %s\n", tmp, strerror(errno));
		rh_server_destroy(s);
		return NULL;
	}
	if (snprintf(s->logpath, sizeof s->logpath, "%s/redis.log", s->dir) >=
			(int)sizeof s->logpath) {
		fprintf(stderr, "redis_harness: path too long: %s\n", s->dir);
		rh_remove_dir(s->dir);
		rh_server_destroy(s);
		return NULL;
	}

	if (conf_lines != NULL && rh_write_conf(s, conf_lines) != 0) {
		fprintf(stderr, "redis_harness: cannot write %s: %s\n", s->conf, strerror(errno));
		rh_remove_dir(s->dir);
		rh_server_destroy(s);
		return NULL;
	}
	int bus = rh_needs_bus_port(extra);
	for (int attempt = 0; attempt < RH_START_ATTEMPTS; attempt++) {
		s->port = bus ? rh_pick_port_with_bus() : rh_pick_port();
		if (s->port <= 0)
			continue;
		off_t logfrom = rh_file_size(s->logpath);
		if (rh_spawn(s) != 0)
			break;
		int r = rh_wait_ready(s, logfrom);
		if (r == 0) {
			snprintf(s->uri, sizeof s->uri, "redis://%s:%d", RH_HOST, s->port);
			rh_registry_add(s);
			return s;
		}
		if (r < 0)
			break;
		/* Exited early: most likely the port was taken meanwhile. */
		if (attempt == RH_START_ATTEMPTS - 1)
			rh_report_failure(s, logfrom, "server exited during startup");
	}
	fprintf(stderr, "redis_harness: could not start %s\n", g_server_path);
	rh_remove_dir(s->dir);
	rh_server_destroy(s);
	return NULL;
}

rh_server *rh_server_start(const char *const *extra)
{
	return rh_start(extra, NULL);
}

rh_server *rh_sentinel_start(const char *const *extra, const char *const *conf_lines)
{
	return rh_start(extra, conf_lines);
}

int rh_servers_start(rh_server **out, int n, const char *const *extra)
{
	if (!out || n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		out[i] = rh_server_start(extra);
		if (!out[i]) {
			for (int j = 0; j < i; j++) {
				rh_server_free(out[j]);
				out[j] = NULL;
			}
			return -1;
		}
	}
	return 0;
}

int rh_server_port(const rh_server *s)
{
	return s ? s->port : -1;
}

pid_t rh_server_pid(const rh_server *s)
{
	return s ? s->pid : 0;
}

const char *rh_server_uri(const rh_server *s)
{
	return s ? s->uri : NULL;
}

const char *rh_server_dir(const rh_server *s)
{
	return s ? s->dir : NULL;
}

int rh_server_kill(rh_server *s)
{
	if (!s || s->pid <= 0 || s->owner != getpid())
		return -1;
	/* Close our connection first, so the server side has no TIME_WAIT on its port. */
	rh_drop_ctx(s);
	rh_kill_and_reap(s);
	return 0;
}

int rh_server_pause(rh_server *s)
{
	if (!s || s->pid <= 0)
		return -1;
	return kill(s->pid, SIGSTOP) == 0 ? 0 : -1;
}

int rh_server_resume(rh_server *s)
{
	if (!s || s->pid <= 0)
		return -1;
	return kill(s->pid, SIGCONT) == 0 ? 0 : -1;
}

int rh_server_restart(rh_server *s)
{
	if (!s || s->pid > 0 || s->dir_removed || s->owner != getpid())
		return -1;
	rh_drop_ctx(s);
	for (int attempt = 0; attempt < RH_RESTART_ATTEMPTS; attempt++) {
		off_t logfrom = rh_file_size(s->logpath);
		if (rh_spawn(s) != 0)
			return -1;
		int r = rh_wait_ready(s, logfrom);
		if (r == 0)
			return 0;
		if (r < 0)
			return -1;
		/* Exited early: the port may be briefly in use; it cannot change. */
		if (attempt == RH_RESTART_ATTEMPTS - 1) {
			rh_report_failure(s, logfrom, "server exited during restart");
			break;
		}
		rh_sleep_ms(100);
	}
	return -1;
}

void rh_server_free(rh_server *s)
{
	if (!s)
		return;
	rh_registry_remove(s);
	rh_drop_ctx(s);
	if (s->owner == getpid()) {
		rh_kill_and_reap(s);
		if (!s->dir_removed)
			rh_remove_dir(s->dir);
	}
	rh_server_destroy(s);
}

void rh_cleanup_all(void)
{
	rh_lock(&g_registry_lock);
	for (rh_server *s = g_registry; s; s = s->next) {
		/* A forked child inherits the registry; the servers are not its own. */
		if (s->owner != getpid())
			continue;
		rh_kill_and_reap(s);
		if (!s->dir_removed) {
			rh_remove_dir(s->dir);
			s->dir_removed = 1;
		}
	}
	rh_unlock(&g_registry_lock);
}

/* ---- commands -------------------------------------------------------------- */

/* Called with s->lock held. */
static redisContext *rh_ctx(rh_server *s)
{
	if (s->ctx)
		return s->ctx;
	if (s->pid <= 0)
		return NULL;
	redisContext *c = rh_connect(s->port, RH_CMD_TIMEOUT_MS);
	if (!c)
		return NULL;
	if (rh_auth(s, c) != 0) {
		redisFree(c);
		return NULL;
	}
	s->ctx = c;
	return c;
}

/* Called with s->lock held; drops the connection after a transport error. */
static redisReply *rh_checked(rh_server *s, redisReply *r)
{
	if (!r || s->ctx->err) {
		if (r)
			freeReplyObject(r);
		redisFree(s->ctx);
		s->ctx = NULL;
		return NULL;
	}
	return r;
}

static redisReply *rh_vcommand(rh_server *s, const char *fmt, va_list ap)
{
	if (!s || !fmt)
		return NULL;
	rh_lock(&s->lock);
	redisReply *r = NULL;
	redisContext *c = rh_ctx(s);
	if (c)
		r = rh_checked(s, redisvCommand(c, fmt, ap));
	rh_unlock(&s->lock);
	return r;
}

redisReply *rh_command(rh_server *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = rh_vcommand(s, fmt, ap);
	va_end(ap);
	return r;
}

redisReply *rh_command_argv(rh_server *s, int argc, const char **argv, const size_t *argvlen)
{
	if (!s || argc <= 0 || !argv)
		return NULL;
	rh_lock(&s->lock);
	redisReply *r = NULL;
	redisContext *c = rh_ctx(s);
	if (c)
		r = rh_checked(s, redisCommandArgv(c, argc, argv, argvlen));
	rh_unlock(&s->lock);
	return r;
}

int64_t rh_command_int(rh_server *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = rh_vcommand(s, fmt, ap);
	va_end(ap);
	int64_t v = INT64_MIN;
	if (r && r->type == REDIS_REPLY_INTEGER)
		v = (int64_t)r->integer;
	if (r)
		freeReplyObject(r);
	return v;
}
