/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: TLS on a connection's own socket, with OpenSSL's non-blocking
 * API, so that TLS keeps every deadline the plain path keeps: the handshake
 * is one more step of connecting (c->connecting stays set until it is done)
 * and reads and writes return EAGAIN with c->want saying which readiness
 * (POLLIN or POLLOUT) the next attempt waits for - a TLS read can need the
 * socket writable and a write readable.
 *
 * Built with OpenSSL when DLOCK_HAVE_TLS is defined; without it, a TLS
 * context cannot be made and the message says how to get one.
 */
#ifndef DLOCK_CORE_TLS_H
#define DLOCK_CORE_TLS_H

#include <stddef.h>
#include <sys/types.h>

struct dlock__conn;

/* What a context is made from (the client's tls_* options, copied field
 * by field by the client: the transport knows no client options). */
typedef struct dlock__tls_opts {
	const char *ca_file, *ca_dir;     /* the CA to verify with (NULL: the system's) */
	const char *cert_file, *key_file; /* a client certificate (NULL: none) */
	const char *server_name;          /* the name verified and sent (NULL: the host) */
	int insecure;                     /* no verification at all */
} dlock__tls_opts;

/* What a client's TLS connections share: the verification settings, the
 * CA and the client certificate, loaded once. */
typedef struct dlock__tls_ctx dlock__tls_ctx;

/*
 * Make the context for `host` (the name verified and sent as SNI unless
 * o->server_name says otherwise). Files are read now, so a missing or
 * bad one fails dlock_client_new(), naming the file.
 * Returns 0, DLOCK_EINVAL (bad file or setting; message set) or DLOCK_ENOMEM.
 */
int dlock__tls_ctx_new(dlock__tls_ctx **out, const dlock__tls_opts *o, const char *host);
void dlock__tls_ctx_free(dlock__tls_ctx *ctx);

/* The same settings (and certificates: the SSL_CTX is shared) for another
 * host: a cluster's node. Its name is the host, unless tls_server_name set one. */
int dlock__tls_ctx_for_host(dlock__tls_ctx **out, const dlock__tls_ctx *base, const char *host);

/* "TLS, verified" or "TLS, NOT verified (tls_insecure)": for messages. */
const char *dlock__tls_ctx_describe(const dlock__tls_ctx *ctx);

/* Begin the handshake on c's connected socket (c->connecting stays set). */
int dlock__tls_start(struct dlock__conn *c, dlock__tls_ctx *ctx);

/* One step of the handshake: 0 when done, DLOCK__AGAIN with c->want set,
 * or an error (message set, naming the cause and what to check). */
int dlock__tls_handshake(struct dlock__conn *c);

/* As recv()/send(): > 0 bytes, 0 for a closed connection (read only), or -1
 * with errno EAGAIN (c->want set) or another errno (dlock__tls_strerror). */
ssize_t dlock__tls_read(struct dlock__conn *c, void *buf, size_t len);
ssize_t dlock__tls_write(struct dlock__conn *c, const void *buf, size_t len);

/* Decrypted bytes already buffered: readable without the socket being so. */
int dlock__tls_pending(const struct dlock__conn *c);

/* Why the last read or write of this thread failed (OpenSSL's reason). */
const char *dlock__tls_strerror(void);

/* Free c's TLS state (no close_notify: the socket is closed right after). */
void dlock__tls_close(struct dlock__conn *c);

#endif
