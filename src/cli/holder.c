/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Naming a lock's holder for people: `status`, `status --watch` and the
 * "not acquired" message of run/acquire. A holder whose client registered
 * (dlock_client_options.label; `run` and `acquire` always do) is shown as
 *
 *	web-3 pid 4121 (./nightly.sh)             without a label
 *	nightly [web-3 pid 4121 (./nightly.sh)]   with --label nightly
 *
 * followed where it fits by how long it has held ("for 12m 3s"); any other
 * (Redisson, a registration that expired) by its owner field, as before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "status.h"

/* The longest command kept in a registration (the library keeps 200 bytes). */
#define COMMAND_MAX 200

static char command_buf[COMMAND_MAX + 1];

void cli_holder_configure(cli_config *cfg, const char *command, const char *label,
		char *const *argv)
{
	size_t used = 0, i;

	if (strcmp(command, "run") != 0 && strcmp(command, "acquire") != 0 &&
			strcmp(command, "hold") != 0)
		return;
	cfg->label = label != NULL ? label : "";
	if (strcmp(command, "run") != 0) {
		cfg->command = command;
		return;
	}
	/* The command and its arguments, joined by spaces; "..." when cut. */
	for (i = 0; argv[i] != NULL && used < COMMAND_MAX; i++) {
		int n = snprintf(command_buf + used, sizeof(command_buf) - used, "%s%s", i ? " " : "",
				argv[i]);

		used += n < 0 ? 0 : (size_t)n;
	}
	if (used > COMMAND_MAX || argv[i] != NULL)
		memcpy(command_buf + COMMAND_MAX - 3, "...", 4);
	cfg->command = command_buf;
}

/* "12m 3s": the two largest units. */
static void duration(char *buf, size_t len, int64_t ms)
{
	int64_t s = ms < 0 ? 0 : ms / 1000;

	if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm %llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lldh %lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%lldd %lldh", (long long)(s / 86400),
				(long long)(s % 86400 / 3600));
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_holder_lookup(dlock_holder *h, dlock_client *client, const char *owner)
{
	return owner != NULL && dlock_client_holder(h, client, owner) == 0 && h->registered;
}

/* Messages show this much of a holder's command (JSON shows it all). */
#define SHOWN_COMMAND_MAX 40

const char *cli_holder_words(const dlock_holder *h, char *buf, size_t len)
{
	char who[600], cmd[SHOWN_COMMAND_MAX + 4];
	size_t n = strlen(h->command);

	if (n > SHOWN_COMMAND_MAX) { /* an inline `sh -c` script would fill the line */
		n = SHOWN_COMMAND_MAX;
		while (n > 0 && ((unsigned char)h->command[n] & 0xC0) == 0x80)
			n--; /* not inside a UTF-8 character */
		memcpy(cmd, h->command, n);
		memcpy(cmd + n, "...", 4);
	} else {
		memcpy(cmd, h->command, n + 1);
	}
	snprintf(who, sizeof(who), "%s pid %lld%s%s%s", h->host, (long long)h->pid,
			cmd[0] ? " (" : "", cmd, cmd[0] ? ")" : "");
	if (h->label[0])
		snprintf(buf, len, "%s [%s]", h->label, who);
	else
		snprintf(buf, len, "%s", who);
	return buf;
}

const char *cli_holder_since(const dlock_holder *h, char *buf, size_t len)
{
	char d[32];

	duration(d, sizeof(d), wall_ms() - h->since_ms);
	snprintf(buf, len, "for %s", d);
	return buf;
}

const char *cli_holder_describe(dlock_client *client, const char *owner, char *buf, size_t len)
{
	dlock_holder h = DLOCK_HOLDER_INIT;
	char who[700];

	if (!cli_holder_lookup(&h, client, owner)) {
		snprintf(buf, len, "%s", owner);
		return buf;
	}
	snprintf(buf, len, "%s (%s)", owner, cli_holder_words(&h, who, sizeof(who)));
	return buf;
}

/* Who holds it, asked of each node in turn: the first registered holder,
 * else the first owner seen. */
void cli_holder_after_failure(const cli_target *t, char *buf, size_t len)
{
	size_t i;
	int named = 0;

	buf[0] = '\0';
	for (i = 0; i < t->n && t->locks != NULL && !named; i++) {
		dlock_lock_info *info = NULL;
		const char *owner;
		dlock_holder h = DLOCK_HOLDER_INIT;
		char who[700], since[48];

		if (t->locks[i] == NULL || dlock_lock_query(&info, t->locks[i]) < 0)
			continue;
		owner = dlock_lock_info_holder_owner(info, 0);
		if (owner != NULL && cli_holder_lookup(&h, t->clients[i], owner)) {
			snprintf(buf, len, "; held by %s %s", cli_holder_words(&h, who, sizeof(who)),
					cli_holder_since(&h, since, sizeof(since)));
			named = 1;
		} else if (owner != NULL && buf[0] == '\0') {
			snprintf(buf, len, "; held by %s", owner);
		}
		dlock_lock_info_free(info);
	}
}
