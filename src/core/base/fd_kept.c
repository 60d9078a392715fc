/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdatomic.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/base/fd_kept.h"
#include "core/base/sys.h"

/* Descriptors below this are noted (a process's connections are far fewer:
 * 16 KiB of zeroed memory, touched only where used); others are taken out
 * of their set at once, as before. */
#define KEPT_MAX 4096

/* kept[fd]: (epfd + 1) << 3 | mask (POLLIN 1, POLLOUT 4), or 0 when no set keeps fd. */
static _Atomic unsigned int kept[KEPT_MAX];

static unsigned int note_of(int epfd, int mask)
{
	return ((unsigned int)epfd + 1) << 3 | ((unsigned int)mask & 7);
}

int dlock__fd_keep(int fd, int epfd, int mask)
{
	if (fd < 0 || fd >= KEPT_MAX || epfd < 0)
		return -1;
	atomic_store(&kept[fd], note_of(epfd, mask));
	return 0;
}

int dlock__fd_unkeep(int fd, int epfd, int *mask)
{
	unsigned int was;

	if (fd < 0 || fd >= KEPT_MAX)
		return 0;
	was = atomic_load(&kept[fd]);
	if (was >> 3 != (unsigned int)epfd + 1 || !atomic_compare_exchange_strong(&kept[fd], &was, 0))
		return 0;
	*mask = (int)(was & 7);
	return 1;
}

void dlock__fd_close(int fd)
{
	if (fd < 0)
		return;
	if (fd < KEPT_MAX) {
		unsigned int was = atomic_exchange(&kept[fd], 0);

		if (was != 0)
			epoll_ctl((int)(was >> 3) - 1, EPOLL_CTL_DEL, fd, NULL);
	}
	dlock__sys_get()->close(fd);
}

void dlock__fd_forget_set(int epfd)
{
	size_t fd;

	for (fd = 0; fd < KEPT_MAX; fd++) {
		unsigned int was = atomic_load(&kept[fd]);

		if (was != 0 && was >> 3 == (unsigned int)epfd + 1)
			atomic_compare_exchange_strong(&kept[fd], &was, 0);
	}
}
