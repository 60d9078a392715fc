/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the semaphore handle (semaphore.c), its acquisitions
 * (semaphore_op.c), its expirable permits (permits.c) and their renewal
 * (permit_job.c), and its scripts (semaphore_scripts.c).
 */
#ifndef DLOCK_SINGLE_SEMAPHORE_INTERNAL_H
#define DLOCK_SINGLE_SEMAPHORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dlock/semaphore.h"
#include "core/drive/client.h"
#include "core/drive/cmd_op.h"
#include "core/loop/loop.h"
#include "core/mux/mux_loop.h"
#include "core/net/script.h"
#include "single/holds.h"

/* Redisson's nonExpirableTimeout: the score of a permit without a lease. */
#define DLOCK__PERMIT_NO_LEASE "922337203685477"

/* A waiter with nothing else to wake it looks again this often, in case
 * a message went unheard (a reconnect wakes it anyway). */
#define DLOCK__SEM_POLL_MS 5000

/* How long a plain acquisition's receipt lives (its undo runs right behind it). */
#define DLOCK__SEM_RECEIPT_MS "60000"

/* One expirable permit taken through a handle (permits.c). */
typedef struct dlock__permit {
	char id[DLOCK_PERMIT_ID_SIZE];
	unsigned char raw[16];
	int64_t lease_ms;     /* the lease each renewal (or the acquire) gives it */
	int renewed;          /* renewed by the handle's job (DLOCK_LEASE_WATCHDOG) */
	int64_t confirmed_at; /* monotonic ms a renewal (or the acquire) was sent that the server applied */
	int lost;             /* 0, or a dlock_lost_reason */
	int expired;          /* a check saw its lease run out: lost, whatever a late renewal says */
	int64_t since;        /* acquired (sent) at, for hold_ms (dlock/stats.h) */
	int counted;          /* in the client's held gauge: not yet released, lost or forgotten */
	struct dlock__permit *next;
} dlock__permit;

/* The renewal job of a handle's permits, on its client's loop. */
typedef struct dlock__permit_job {
	dlock__loop *loop;
	dlock__timer timer;
	dlock__task kick, stop;
	dlock__task now; /* a message on the channel: renew at once (watch_force_unlock) */
	int heard;       /* one came: the next run checks the leased permits too */
	dlock__timer ends;     /* a listening leased permit's lease ends (permit_watch.c) */
	dlock__task ends_kick; /* a leased permit listens: arm `ends` for it */
	int64_t ends_due;      /* when `ends` is armed for (the loop's); DLOCK__NEVER: not */
	int again;       /* one came while a renewal was under way: another after it */
	dlock__mux_loop ml;
	dlock__mux_op mop;
	dlock__call call;
	const char **argv; /* the running renewal's keys and args, and their memory */
	size_t *lens;
	char *mem;
	size_t nids;
	int64_t sent_at, wall_at;
	int running, armed, stopped;
	int started; /* a renewed permit was ever added (s->mu) */
	pthread_cond_t stopped_cv;
} dlock__permit_job;

struct dlock_semaphore {
	dlock_semaphore_kind kind;
	dlock_client *client;
	char *name;
	size_t name_len;
	char *channel; /* redisson_sc:{name} */
	size_t channel_len;
	char *timeouts; /* {name}:timeout (expirable) */
	size_t timeouts_len;
	char *receipt_prefix; /* dlock_semaphore_undo:{name}: (plain) */
	size_t receipt_prefix_len;
	char shown[80];
	dlock__errbuf err;
	_Atomic int refs; /* the caller's, and one per operation not yet ended */
	pthread_mutex_t mu; /* the permits, the callback, the job's flags */
	dlock__permit *permits;
	dlock_lost_cb lost_cb;
	void *lost_ud;
	int freed; /* the caller freed it: renew nothing more */
	dlock__permit_job job;
	/* watch_force_unlock: while a renewed permit is held, the handle listens
	 * on its channel, where a force release publishes (permit_watch.c). */
	dlock__channel_watch listen;
	int listening;
};

/* Keys count and channel (and the timeouts of an expirable one when `all`)
 * begin the call of script. */
void dlock__sem_push_keys(dlock_semaphore *s, dlock__call *call, dlock__script *script, int all);

/*
 * A one-command op on s (core/drive/cmd_op.h): its reference taken
 * (kind->unref must be dlock__sem_cmd_unref), on its client's loop. 0, or
 * DLOCK_EINVAL (s or cb NULL), DLOCK_EFORKED, DLOCK_ENOMEM with a message.
 */
int dlock__sem_cmd_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind,
		dlock_semaphore *s, dlock_op_cb cb, void *userdata);
void dlock__sem_cmd_unref(void *s);

/* Drop a reference; the last frees the handle. */
void dlock__sem_unref(dlock_semaphore *s);

/* The loop the handle's background work and async operations run on. */
dlock__loop *dlock__sem_loop(dlock_semaphore *s);

/* Scripts: see semaphore_scripts.c. */
extern dlock__script dlock__script_sem_acquire;
extern dlock__script dlock__script_sem_undo;
extern dlock__script dlock__script_sem_release;
extern dlock__script dlock__script_sem_try_set;
extern dlock__script dlock__script_sem_add;
extern dlock__script dlock__script_sem_set;
extern dlock__script dlock__script_sem_available;
extern dlock__script dlock__script_permit_acquire;
extern dlock__script dlock__script_permit_release;
extern dlock__script dlock__script_permit_renew;
extern dlock__script dlock__script_sem_query;
extern dlock__script dlock__script_sem_force_release;

/* A permit id: 16 random bytes, and their 32 hex digits. */
void dlock__permit_id_new(char id[DLOCK_PERMIT_ID_SIZE], unsigned char raw[16]);

/* Parse 32 hex digits into raw; 0, or -1 when it is not one. */
int dlock__permit_id_parse(const char *id, unsigned char raw[16]);

/* The epoch ms a lease taken now ends, as text (buf: 24 bytes); its length. */
size_t dlock__permit_deadline(char *buf, int64_t lease_ms);

/* The lease a permit gets: lease_ms, or the watchdog timeout. */
int64_t dlock__permit_lease(const dlock_semaphore *s, int64_t lease_ms);

/* Record a permit taken at sent_at (monotonic) through s and, for a
 * watchdog lease, start renewing it. DLOCK_ENOMEM (the permit is then
 * given back by the caller). */
int dlock__permit_add(dlock_semaphore *s, const char *id, const unsigned char raw[16],
		int64_t lease_ms, int64_t sent_at);

/* Forget a permit; 1 when it was held here and not lost, 0 lost, -1 unknown. */
int dlock__permit_forget(dlock_semaphore *s, const char *id);

/* s->mu held: the permit's lease has surely passed since its last
 * confirmed renewal. */
int dlock__permit_expired(const dlock__permit *p, int64_t now);

/* s->mu held: whether p goes in this run of the job - every renewed permit
 * held, and when a message came (`heard`) the leased ones held too. */
int dlock__permit_in_run(const dlock__permit *p, int heard, int64_t now);

/* Set up the job (no traffic, no loop work; permit_job.c). */
void dlock__permit_job_init(dlock_semaphore *s);

/* Stop the renewal job for good (the handle is being freed). */
void dlock__permit_job_stop(dlock_semaphore *s);

/* Free the records. */
void dlock__permits_free(dlock_semaphore *s);

/* Listen on the channel while a permit is held (renewed, or leased and
 * its lease lasts) and the client watches for force unlocks, else not
 * (s->mu not held; permit_watch.c). */
void dlock__permit_watch_update(dlock_semaphore *s);

/* Whether a message on the channel is worth a look for p (s->mu held):
 * held, renewed or its lease not yet run out. */
int dlock__permit_listens(const dlock__permit *p, int64_t now);

/* From when p's lease may have run out on the server (its last confirmed
 * renewal or acquire plus the lease, less drift). */
int64_t dlock__permit_lease_end(const dlock__permit *p);

/* Set up the lease-end timer (permit_watch.c); end it, on the loop. */
void dlock__permit_watch_init(dlock_semaphore *s);
void dlock__permit_watch_stop_here(dlock_semaphore *s);

/* A message came on the channel: renew the permits now (permit_job.c). */
void dlock__permit_renew_now(dlock_semaphore *s);

/* Build the release of permit raw into call (keys and args point into s
 * and into the caller's raw/now, which must outlive it). */
void dlock__permit_release_call(dlock_semaphore *s, dlock__call *call, const unsigned char raw[16],
		char now[24]);

/* Build the release of k plain permits (kbuf: 24 bytes). */
void dlock__sem_release_call(dlock_semaphore *s, dlock__call *call, int64_t k, char kbuf[24]);

#endif
