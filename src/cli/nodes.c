/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodes.h"

/* s starts a URI: a scheme ([A-Za-z][A-Za-z0-9+.-]*) and "://". */
static int starts_uri(const char *s)
{
	size_t n = 0;

	if (!isalpha((unsigned char)s[0]))
		return 0;
	while (isalnum((unsigned char)s[n]) || s[n] == '+' || s[n] == '-' || s[n] == '.')
		n++;
	return strncmp(s + n, "://", 3) == 0;
}

static int add_node(cli_config *cfg, const char *s, size_t n)
{
	char **grown = realloc(cfg->nodes, (cfg->n + 1) * sizeof(*grown));

	if (grown == NULL)
		return -1;
	cfg->nodes = grown;
	cfg->nodes[cfg->n] = strndup(s, n);
	return cfg->nodes[cfg->n++] == NULL ? -1 : 0;
}

/* Where list has an empty element, in words ("after \",\""), or NULL. */
static const char *empty_element(const char *list)
{
	if (list[0] == ',')
		return "before \",\"";
	if (strstr(list, ",,") != NULL)
		return "between \",,\"";
	if (list[strlen(list) - 1] == ',')
		return "after \",\"";
	return NULL;
}

int cli_nodes_parse(cli_config *cfg, const char *list, const char *from)
{
	const char *start = list, *p, *where;
	char shown[512];

	if (list[0] == '\0') {
		if (strcmp(from, "DLOCK_NODES") == 0)
			fprintf(stderr,
					"dlock: DLOCK_NODES is set but empty: give it one node URI at "
					"least, or unset it for the default, %s (see dlock --help)\n",
					CLI_DEFAULT_NODES);
		else
			fprintf(stderr,
					"dlock: %s is empty: give one node URI at least (%s for a local "
					"server) (see dlock --help)\n",
					from, CLI_DEFAULT_NODES);
		return EXIT_USAGE;
	}
	if ((where = empty_element(list)) != NULL) {
		fprintf(stderr, "dlock: %s \"%s\": empty node %s (see dlock --help)\n", from,
				cli_nodes_shown(list, shown, sizeof(shown)), where);
		return EXIT_USAGE;
	}
	/* URIs are comma-separated; a comma not followed by a scheme belongs to
	 * the URI before it (the sentinel list of redis+sentinel://a,b,c/name). */
	for (p = list; *p != '\0'; p++) {
		if (*p != ',' || !starts_uri(p + 1))
			continue;
		if (add_node(cfg, start, (size_t)(p - start)) < 0)
			return EXIT_UNAVAILABLE;
		start = p + 1;
	}
	return add_node(cfg, start, strlen(start)) < 0 ? EXIT_UNAVAILABLE : 0;
}

/* Append n bytes of s to buf (of len, *used so far), truncating. */
static void put(char *buf, size_t len, size_t *used, const char *s, size_t n)
{
	if (*used + 1 >= len)
		return;
	if (n > len - 1 - *used)
		n = len - 1 - *used;
	memcpy(buf + *used, s, n);
	*used += n;
	buf[*used] = '\0';
}

/* The userinfo of the URI at s (just after "://"): its length up to and
 * with the last '@' before the path, or 0 when it has none. */
static size_t userinfo_len(const char *s)
{
	size_t authority = strcspn(s, "/"), n = 0, i;

	for (i = 0; i < authority; i++)
		if (s[i] == '@')
			n = i + 1;
	return n;
}

const char *cli_nodes_shown(const char *text, char *buf, size_t len)
{
	const char *p = text, *scheme;
	size_t used = 0;

	buf[0] = '\0';
	while ((scheme = strstr(p, "://")) != NULL) {
		const char *auth = scheme + 3;
		size_t info = userinfo_len(auth);
		const char *colon = memchr(auth, ':', info);

		put(buf, len, &used, p, (size_t)(auth - p));
		if (info > 0) {
			/* user:password@ -> user:***@; a lone word may be a password too */
			put(buf, len, &used, auth, colon != NULL ? (size_t)(colon - auth) + 1 : 0);
			put(buf, len, &used, "***@", 4);
		}
		p = auth + info;
	}
	put(buf, len, &used, p, strlen(p));
	return buf;
}
