/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the URI parser (what dlock_client_new and the CLI's -n read):
 * redis://, rediss:// and unix:// alike. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/net/uri.h"
#include "dlock/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[256];
	dlock__uri u;
	int rc;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	rc = dlock__uri_parse(&u, text, err, sizeof(err));
	if (rc == 0) {
		/* A parse that succeeds always gives a usable address: a host and
		 * port, an absolute socket path, sentinels (each a host and
		 * port) and a primary's name, or cluster seeds - exactly one. */
		int tcp = u.host != NULL && u.host[0] != '\0' && u.port >= 1 && u.port <= 65535;
		int unix_socket = u.path != NULL && u.path[0] == '/' && u.host == NULL;
		int sentinel = u.n_hosts > 0 && u.master != NULL && u.master[0] != '\0' &&
				u.host == NULL && u.path == NULL && !u.cluster;
		int cluster = u.n_hosts > 0 && u.master == NULL && u.host == NULL &&
				u.path == NULL && u.cluster && u.db == 0;

		for (size_t i = 0; (sentinel || cluster) && i < u.n_hosts; i++)
			if (u.hosts[i] == NULL || u.hosts[i][0] == '\0' || u.ports[i] < 1 ||
					u.ports[i] > 65535)
				abort();
		if (tcp + unix_socket + sentinel + cluster != 1 || u.db < 0 ||
				(u.tls && !tcp && !cluster))
			abort();
		dlock__uri_clear(&u);
	} else if (rc != DLOCK_EINVAL && rc != DLOCK_ENOMEM) {
		abort();
	} else if (err[0] == '\0') {
		abort(); /* every refusal says why */
	}
	free(text);
	return 0;
}
