/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Running the `dlock` command in tests: fork/execv of DLOCK_CLI_PATH with
 * stdout and stderr captured through pipes, the exit status read as a shell
 * would (128+N when killed by signal N), under a hard timeout; and the small
 * checks on its output and on the processes it runs.
 */
#ifndef DLOCK_TEST_CLI_PROC_H
#define DLOCK_TEST_CLI_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HARD_TIMEOUT_S 20 /* a dlock call that takes longer fails the test */
#define OUT_MAX 65536

typedef struct proc {
	pid_t pid;
	int fd[2]; /* read ends: stdout, stderr (-1 once closed) */
	char out[OUT_MAX];
	size_t out_len;
	char err[OUT_MAX];
	size_t err_len;
	int status; /* as a shell reports it: exit code, or 128+signal */
	int done;
	int64_t t0, t1;  /* started, exit noticed (rh_now_ms) */
	char desc[1024]; /* "dlock arg arg ..." for messages */
} proc;

/* How the next dlock starts: in a process group of its own (as a shell job
 * is), with SIGHUP ignored (as under nohup). */
extern int g_own_group, g_ignore_hup;
/* The next dlock's stdin, when >= 0 (else /dev/null); the caller keeps it. */
extern int g_stdin_fd;

/* A scratch directory and a shell command that writes its pid to <dir>/pid
 * between `before` and `after`. */
typedef struct pid_job {
	char dir[64], pidfile[128], script[256];
	long child; /* the command's pid, once watched_run saw it start */
} pid_job;

proc *proc_new(void);
void proc_start(proc *p, const char *const *env, const char *const *args);
int proc_wait(proc *p, int timeout_s);
/* Read p's stdout while it runs until it has `lines` lines: 0, or -1 when
 * it exited or timeout_ms passed first. */
int proc_wait_lines(proc *p, size_t lines, int64_t timeout_ms);
int64_t proc_elapsed(const proc *p);
void proc_free(proc *p);
proc *dlock_env(const char *const *env, const char *const *args);
proc *dlock_bg(const char *const *args);
size_t count_char(const char *s, char c);
size_t count_str(const char *hay, const char *needle);
int one_line(const char *s);
int has_word(const char *text, const char *word);
int owner_matches(const char *owner, pid_t pid);
int closed_port(void);
void make_tmpdir(char *buf, size_t len);
void pid_job_init(pid_job *j, const char *before, const char *after);
void remove_tmpdir(const char *dir, const char *const *files);
long wait_for_pidfile(const char *path, int64_t timeout_ms);
int file_exists(const char *path);
int gone_within(pid_t pid, int64_t timeout_ms);
/* 1 while a process whose command line starts with `mark` runs (zombies aside). */
int process_running(const char *mark);

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define DLOCK(...) dlock_env(NULL, ARGS(__VA_ARGS__))
#define EXPECT_STATUS(p, want) \
	cr_expect_eq((p)->status, (want), "`%s` exited %d, expected %d\nstdout: %s\nstderr: %s", \
			(p)->desc, (p)->status, (want), (p)->out, (p)->err)
#define ASSERT_STATUS(p, want) \
	cr_assert_eq((p)->status, (want), "`%s` exited %d, expected %d\nstdout: %s\nstderr: %s", \
			(p)->desc, (p)->status, (want), (p)->out, (p)->err)
#define EXPECT_ONE_LINE_ERR(p) \
	cr_expect(one_line((p)->err), "`%s`: stderr should be one line, is (%zu bytes):\n%s", \
			(p)->desc, (p)->err_len, (p)->err)

#endif
