/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fenced_writer - why a lock alone cannot protect a resource, and how a
 * fencing token does.
 *
 * Writer A takes a fenced lock (1 s lease), gets token N, and is then
 * paused (SIGSTOP: think of a long GC pause or a stalled VM) before it
 * writes. Its lease runs out; writer B takes the lock, gets token N+1 and
 * writes. When A wakes up it still believes it holds the lock and writes
 * too - but the storage remembers the highest token it has accepted and
 * refuses A's older one.
 *
 * The "storage" here is a small file guarded by flock(): it keeps the
 * highest token seen and rejects writes that carry a smaller one. A real
 * resource does the same with a conditional update.
 *
 * Run:  fenced_writer [redis://host:port]     (default: $DLOCK_NODES or
 *       redis://127.0.0.1:6379). With several comma-separated URIs in
 *       DLOCK_NODES it uses a fenced RedLock over them instead.
 * Exits 0 when the stale write was refused.
 */
#define _GNU_SOURCE /* fork, flock, pread, strtok_r */
#include <dlock.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEASE_MS 1000

/* The storage: "<highest token>\n<data>". Returns 0 accepted, 1 refused, -1 error. */
static int storage_write(const char *path, long long token, const char *data)
{
	char buf[256];
	long long highest = 0;
	ssize_t n;
	int fd = open(path, O_RDWR | O_CREAT, 0600), rc = -1;

	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX) == 0) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			highest = atoll(buf);
		}
		if (token < highest) {
			rc = 1;
		} else {
			int len = snprintf(buf, sizeof(buf), "%lld\n%s\n", token, data);

			rc = ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)len, 0) == len ? 0 : -1;
		}
		flock(fd, LOCK_UN);
	}
	close(fd);
	return rc;
}

/* One writer's lock: a fenced RLock on one node, or a fenced RedLock on several. */
typedef struct writer_lock {
	dlock_client *client;
	dlock_lock *lock;
	dlock_redlock *redlock;
} writer_lock;

static int open_lock(writer_lock *w, const char *nodes)
{
	dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;

	memset(w, 0, sizeof(*w));
	if (strchr(nodes, ',') != NULL) {
		char *copy = strdup(nodes), *save = NULL, *tok;
		const char *uris[16];
		size_t n = 0;
		dlock_redlock_options o = DLOCK_REDLOCK_OPTIONS_INIT;
		int rc;

		for (tok = strtok_r(copy, ",", &save); tok && n < 16; tok = strtok_r(NULL, ",", &save))
			uris[n++] = tok;
		o.fenced = 1;
		rc = dlock_redlock_new_from_uris(&w->redlock, uris, n, "storage:orders", NULL, &o);
		free(copy);
		return rc;
	}
	lo.kind = DLOCK_LOCK_FENCED;
	if (dlock_client_new(&w->client, nodes, NULL) != 0)
		return -1;
	return dlock_lock_new(&w->lock, w->client, "storage:orders", &lo);
}

static int take(writer_lock *w, long long *token)
{
	int64_t t = 0;
	int rc = w->redlock
		? dlock_redlock_acquire_fenced(&t, w->redlock, NULL, 5000, LEASE_MS)
		: dlock_lock_acquire_fenced(&t, w->lock, NULL, 5000, LEASE_MS);

	if (rc != 0)
		fprintf(stderr, "lock: %s: %s\n", dlock_strerror(rc),
				w->redlock ? dlock_redlock_errmsg(w->redlock) : dlock_lock_errmsg(w->lock));
	*token = t;
	return rc;
}

static void give_back(writer_lock *w)
{
	/* A writer whose lease ran out no longer holds anything to release. */
	if (w->redlock)
		dlock_redlock_release(w->redlock, NULL);
	else
		dlock_lock_release(w->lock, NULL);
}

static void close_lock(writer_lock *w)
{
	dlock_redlock_free(w->redlock);
	dlock_lock_free(w->lock);
	dlock_client_free(w->client);
}

static int writer_a(const char *nodes, const char *path, int report_fd)
{
	writer_lock w;
	long long token;
	int rc;

	if (open_lock(&w, nodes) != 0 || take(&w, &token) != 0)
		return 2;
	printf("writer A: got the lock, token %lld; about to write...\n", token);
	fflush(stdout);
	if (write(report_fd, &token, sizeof(token)) != (ssize_t)sizeof(token))
		return 2;
	usleep(300 * 1000); /* the parent pauses us here */
	rc = storage_write(path, token, "written by A");
	printf("writer A: woke up and wrote with token %lld: %s\n", token,
			rc == 0 ? "ACCEPTED" : rc == 1 ? "REFUSED (stale token)" : "error");
	give_back(&w);
	close_lock(&w);
	fflush(stdout); /* the child leaves with _exit() */
	return rc == 1 ? 3 : rc == 0 ? 0 : 2;
}

int main(int argc, char **argv)
{
	const char *nodes = argc > 1 ? argv[1] : getenv("DLOCK_NODES");
	char path[] = "/tmp/fenced-storage-XXXXXX";
	int report[2], status = 0, rc, fd;
	long long token_a = 0, token_b = 0;
	writer_lock b;
	pid_t a;

	if (nodes == NULL || nodes[0] == '\0')
		nodes = "redis://127.0.0.1:6379";
	if ((fd = mkstemp(path)) < 0 || pipe(report) < 0) {
		perror("fenced_writer");
		return 1;
	}
	close(fd);

	a = fork();
	if (a == 0) {
		close(report[0]);
		_exit(writer_a(nodes, path, report[1]));
	}
	close(report[1]);
	if (a < 0 || read(report[0], &token_a, sizeof(token_a)) != (ssize_t)sizeof(token_a)) {
		fprintf(stderr, "fenced_writer: writer A did not get the lock\n");
		unlink(path);
		return 1;
	}
	kill(a, SIGSTOP);
	printf("-- writer A is paused (SIGSTOP) before its write; its %d ms lease runs out --\n",
			LEASE_MS);
	usleep((LEASE_MS + 500) * 1000);

	if (open_lock(&b, nodes) != 0 || take(&b, &token_b) != 0) {
		kill(a, SIGKILL);
		waitpid(a, NULL, 0);
		unlink(path);
		return 1;
	}
	rc = storage_write(path, token_b, "written by B");
	printf("writer B: got the lock, token %lld, wrote: %s\n", token_b,
			rc == 0 ? "ACCEPTED" : "REFUSED");
	give_back(&b);
	close_lock(&b);

	printf("-- writer A resumes (SIGCONT), still believing it holds the lock --\n");
	fflush(stdout);
	kill(a, SIGCONT);
	waitpid(a, &status, 0);
	unlink(path);
	if (rc == 0 && token_b > token_a && WIFEXITED(status) && WEXITSTATUS(status) == 3) {
		printf("result: the storage refused the paused writer's stale write (token %lld < %lld)\n",
				token_a, token_b);
		return 0;
	}
	printf("result: unexpected outcome (A token %lld, B token %lld, A status %d)\n",
			token_a, token_b, status);
	return 1;
}
