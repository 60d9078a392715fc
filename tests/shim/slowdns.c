/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slowdns - an LD_PRELOAD shim for a resolver whose replies are lost:
 * getaddrinfo of a name ending in ".hang.invalid" returns only after 10 s
 * (glibc waits 5 s per lost reply), EAI_AGAIN; other names, and numeric
 * lookups (AI_NUMERICHOST: never sent to a resolver), go to the real one. Built without sanitizers, like fastclock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <string.h>
#include <unistd.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
		struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	static const char hang[] = ".hang.invalid";
	size_t n = node != NULL ? strlen(node) : 0;
	int numeric = hints != NULL && (hints->ai_flags & AI_NUMERICHOST);

	if (!numeric && n >= sizeof(hang) - 1 && strcmp(node + n - (sizeof(hang) - 1), hang) == 0) {
		sleep(10);
		return EAI_AGAIN;
	}
	return ((getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo"))(node, service, hints, res);
}
