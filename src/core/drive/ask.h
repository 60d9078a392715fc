/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one command on a client, driven to its end (ask.c).
 */
#ifndef DLOCK_CORE_ASK_H
#define DLOCK_CORE_ASK_H

#include <stddef.h>
#include <hiredis/hiredis.h>

#include "core/drive/client_state.h"


/*
 * One command on the client (a cluster root: at the member serving its
 * first key), as a run on the loop this call borrows driven to its end
 * (core/mux/mux.h): the connect, the handshake and the command are steps
 * of that loop. 0 with *out its reply (may be an error reply: check it with
 * dlock__reply_check()), or the failure with its message.
 */
int dlock__client_ask(dlock_client *client, int argc, const char **argv, const size_t *lens,
		redisReply **out);

#endif
