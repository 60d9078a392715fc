/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking calls on the loop (core/loop/loop.h): the loop a blocking call
 * borrows, on which it drives its operation to its end - no second way of
 * waiting.
 */
#include <stddef.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/loop/loop.h"

dlock__loop *dlock__loop_borrow(dlock__loop *spare)
{
	dlock__loop *l = dlock__thread_loop();

	if (l == NULL) {
		dlock__loop_init_quiet(spare);
		l = spare;
	}
	l->busy++;
	return l;
}

void dlock__loop_give_back(dlock__loop *l, dlock__loop *spare)
{
	l->busy--;
	if (l == spare)
		dlock__loop_destroy(spare);
	else if (l->busy == 0)
		dlock__loop_quiet(l); /* no descriptor left open between calls */
}
