/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: what rh_cluster.c and rh_cluster_ops.c share (not for tests). */
#ifndef DLOCK_RH_CLUSTER_INT_H
#define DLOCK_RH_CLUSTER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "rh_cluster.h"

#define RHC_SLOTS 16384
#define RHC_ID_LEN 40

struct rh_cluster {
	int n, primaries, replicas;
	rh_server **servers;
	char (*ids)[RHC_ID_LEN + 1];
	char *password; /* the last --requirepass of extra, or NULL */
	char *seed;
};

void rhc_sleep_ms(int ms);
int rhc_running(const rh_cluster *c, int i);

/* The text reply of "cmd sub" ("INFO replication", "CLUSTER INFO"), malloc'd, or NULL. */
char *rhc_text(rh_server *s, const char *cmd, const char *sub);
/* The value of "name:value" lines of such a text into out; 0, or -1 when absent. */
int rhc_get(const char *text, const char *name, char *out, size_t len);
/* Both at once. */
int rhc_field(rh_server *s, const char *cmd, const char *sub, const char *name, char *out,
		size_t len);

/* Who serves each slot in s's view: ports[slot] is the primary's port, 0 when
 * unserved. 0, or -1 when s does not answer as expected. */
int rhc_owner_ports(rh_server *s, int *ports);

/* Until the monotonic deadline (rh_now_ms), wait until every running server
 * says `owner` serves `slot`; 0, or -1 at the deadline. */
int rhc_await_owner(rh_cluster *c, int slot, rh_server *owner, int64_t deadline);

/* The server of ours listening on port, or NULL. */
rh_server *rhc_by_port(rh_cluster *c, int port);

#endif
