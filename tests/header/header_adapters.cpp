// SPDX-License-Identifier: BSD-3-Clause
// <dlock/uv.h> and <dlock/libevent.h> alone, as C++11 with every warning an
// error: declarations only (no inline code of the adapters' in a user's
// translation unit), an opaque handle, the options struct's INIT agreeing
// with its _init(); linked against libdlock-uv.a and libdlock-libevent.a.
#ifdef DLOCK_HAVE_UV
#include <dlock/uv.h>
#include <dlock/uv.h>
#endif
#ifdef DLOCK_HAVE_LIBEVENT
#include <dlock/libevent.h>
#include <dlock/libevent.h>
#endif

#include <cstdio>

int main()
{
	int bad = 0;
#ifdef DLOCK_HAVE_UV
	int (*p_new)(dlock_uv **, uv_loop_t *, const dlock_uv_options *) = dlock_uv_new;
	dlock_loop *(*p_loop)(const dlock_uv *) = dlock_uv_loop;
	void (*p_free)(dlock_uv *) = dlock_uv_free;
	dlock_uv_options a = DLOCK_UV_OPTIONS_INIT, b;

	bad |= p_new == nullptr || p_loop == nullptr || p_free == nullptr;
	bad |= dlock_uv_options_init(&b, DLOCK_UV_OPTIONS_VERSION) != 0 || a.version != b.version;
#endif
#ifdef DLOCK_HAVE_LIBEVENT
	int (*e_new)(dlock_libevent **, event_base *, const dlock_libevent_options *) =
			dlock_libevent_new;
	dlock_loop *(*e_loop)(const dlock_libevent *) = dlock_libevent_loop;
	void (*e_free)(dlock_libevent *) = dlock_libevent_free;
	dlock_libevent_options c = DLOCK_LIBEVENT_OPTIONS_INIT, d;

	bad |= e_new == nullptr || e_loop == nullptr || e_free == nullptr;
	bad |= dlock_libevent_options_init(&d, DLOCK_LIBEVENT_OPTIONS_VERSION) != 0 ||
			c.version != d.version;
#endif
	if (bad)
		std::fprintf(stderr, "header_adapters: an options INIT disagrees with its _init()\n");
	return bad;
}
