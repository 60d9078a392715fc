/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: parsing of redis[s]://[[user]:password@]host[:port][/db],
 * unix://[[user]:password@]/path[?db=N] (alias redis+unix://) and
 * redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
 * and redis+cluster://[[user]:password@]host[:port][,host[:port]...]
 * (rediss+cluster:// for TLS). */
#ifndef DLOCK_CORE_URI_H
#define DLOCK_CORE_URI_H

#include <stddef.h>

typedef struct dlock__uri {
	char *user;     /* NULL when absent (the default user) */
	char *password; /* NULL when absent; "" is a real, empty password */
	char *host;     /* TCP: never NULL after a successful parse; IPv6 without brackets */
	int port;       /* TCP: 1..65535, default 6379 */
	char *path;     /* a Unix socket's path (then host is NULL), absolute */
	int tls;        /* rediss:// */
	int db;         /* >= 0, default 0 */
	/* redis+sentinel:// and redis+cluster:// (then host and path are
	 * NULL): the sentinels to ask, or the cluster's seed nodes, in the
	 * order given; for a sentinel, the name they know the primary by. */
	size_t n_hosts;
	char **hosts;
	int *ports; /* default 26379 (sentinels), 6379 (cluster seeds) */
	char *master;
	int cluster; /* redis+cluster:// */
} dlock__uri;

/*
 * Parse `text` into *out (all strings allocated with dlock__malloc).
 * Returns 0, DLOCK_EINVAL with a one-line reason in err (what is wrong and
 * where, never the password), or DLOCK_ENOMEM. On failure *out holds nothing
 * to free.
 */
int dlock__uri_parse(dlock__uri *out, const char *text, char *err, size_t errlen);

/* Free the strings of *uri and zero it. Accepts a zeroed struct. */
void dlock__uri_clear(dlock__uri *uri);

#endif
