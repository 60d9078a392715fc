/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"
#include "target.h"

#define SECRET_MAX 4096

/* The file's first line, without its line end; NULL after a message. */
static char *read_file(const char *path)
{
	char buf[SECRET_MAX + 1];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "dlock: --password-file %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
		fprintf(stderr,
				"dlock: warning: --password-file %s can be read by other users "
				"(chmod 600 it)\n",
				path);
	n = read(fd, buf, SECRET_MAX + 1);
	close(fd);
	if (n < 0 || n > SECRET_MAX) {
		fprintf(stderr, "dlock: --password-file %s: %s\n", path,
				n < 0 ? strerror(errno) : "larger than 4 KiB: not a password file");
		return NULL;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (buf[0] == '\0') {
		fprintf(stderr, "dlock: --password-file %s: the first line is empty\n", path);
		return NULL;
	}
	return strdup(buf);
}

/* A variable's value, taken out of the environment; NULL when unset. */
static char *take_env(const char *name)
{
	const char *v = getenv(name);
	char *copy = v != NULL ? strdup(v) : NULL;

	unsetenv(name);
	return copy;
}

/* Where the URI's authority starts (after "scheme://"), or NULL. */
static const char *after_scheme(const char *uri)
{
	const char *p = strstr(uri, "://");

	return p != NULL ? p + 3 : NULL;
}

static int has_userinfo(const char *uri)
{
	const char *p = after_scheme(uri);

	/* unix:///path: an '@' after the leading '/' belongs to the path. */
	return p != NULL && *p != '/' && strchr(p, '@') != NULL;
}

/* Percent-encode all but RFC 3986's unreserved characters. */
static void encode(char *out, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
				c == '-' || c == '.' || c == '_' || c == '~') {
			*out++ = (char)c;
		} else {
			*out++ = '%';
			*out++ = hex[c >> 4];
			*out++ = hex[c & 15];
		}
	}
	*out = '\0';
}

/* uri with "user:password@" after its scheme (user may be NULL). */
static char *with_userinfo(const char *uri, const char *user, const char *password)
{
	const char *rest = after_scheme(uri);
	size_t head = (size_t)(rest - uri);
	char *u = malloc(3 * (user ? strlen(user) : 0) + 1);
	char *pw = malloc(3 * strlen(password) + 1);
	char *out = NULL;

	if (u != NULL && pw != NULL) {
		encode(u, user ? user : "");
		encode(pw, password);
		out = malloc(head + strlen(u) + strlen(pw) + strlen(rest) + 3);
	}
	if (out != NULL)
		sprintf(out, "%.*s%s:%s@%s", (int)head, uri, u, pw, rest);
	free(u);
	free(pw);
	return out;
}

/* The password from the file, the named variable or $DLOCK_PASSWORD: NULL
 * when none is given; *failed after a message. */
static char *find_password(const cli_secret_args *a, int *failed)
{
	char *pw = take_env("DLOCK_PASSWORD");

	*failed = 0;
	if (a->file != NULL || a->env != NULL) {
		free(pw);
		pw = a->file != NULL ? read_file(a->file) : take_env(a->env);
		if (pw == NULL && a->file == NULL)
			fprintf(stderr, "dlock: --password-env %s: the variable is not set\n",
					a->env);
		*failed = pw == NULL;
	}
	return pw;
}

/* DLOCK_NODES stays for the command unless it carries a password. */
static void scrub_nodes_env(void)
{
	const char *v = getenv("DLOCK_NODES");
	char *copy = v != NULL ? strdup(v) : NULL, *tok, *save = NULL;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
			tok = strtok_r(NULL, ",", &save)) {
		if (has_userinfo(tok)) {
			unsetenv("DLOCK_NODES");
			break;
		}
	}
	free(copy);
}

int cli_secret_apply(char **nodes, size_t n, const cli_secret_args *a)
{
	int failed;
	char *user = a->user != NULL ? strdup(a->user) : take_env("DLOCK_USER");
	char *pw = find_password(a, &failed);
	int rc = failed ? EXIT_USAGE : 0;

	unsetenv("DLOCK_USER");
	scrub_nodes_env();
	if (rc == 0 && user != NULL && pw == NULL) {
		fprintf(stderr,
				"dlock: --user needs a password (--password-file, --password-env or "
				"DLOCK_PASSWORD)\n");
		rc = EXIT_USAGE;
	}
	for (size_t i = 0; rc == 0 && pw != NULL && i < n; i++) {
		char *with;

		if (has_userinfo(nodes[i]) || after_scheme(nodes[i]) == NULL)
			continue; /* a URI's own password wins; a bad URI is refused later */
		with = with_userinfo(nodes[i], user, pw);
		if (with == NULL) {
			fprintf(stderr, "dlock: out of memory\n");
			rc = EXIT_UNAVAILABLE;
			break;
		}
		free(nodes[i]);
		nodes[i] = with;
	}
	if (pw != NULL)
		memset(pw, 0, strlen(pw));
	free(pw);
	free(user);
	return rc;
}

void cli_sentinel_secrets(char **user, char **password)
{
	*user = take_env("DLOCK_SENTINEL_USER");
	*password = take_env("DLOCK_SENTINEL_PASSWORD");
}
