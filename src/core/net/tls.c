/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS with OpenSSL's non-blocking API on dlock's own sockets (see tls.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/net/tls.h"

#ifdef DLOCK_HAVE_TLS

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct dlock__tls_ctx {
	SSL_CTX *ssl;
	char *name; /* verified against the certificate, sent as SNI unless an IP */
	int name_is_ip;
	int insecure;
	int named; /* the name is tls_server_name (the same for every host) */
};

/* Append `"name"` to buf (a list "a", "b"), what the certificate says
 * made printable: it comes from the network. */
static void add_name(char *buf, size_t len, const unsigned char *name, size_t n)
{
	size_t at = strlen(buf), i;

	if (at + 5 >= len)
		return;
	if (at > 0) {
		buf[at++] = ',';
		buf[at++] = ' ';
	}
	buf[at++] = '"';
	for (i = 0; i < n && at + 2 < len; i++)
		buf[at++] = name[i] >= 0x20 && name[i] < 0x7f && name[i] != '"' ? (char)name[i] : '?';
	buf[at++] = '"';
	buf[at] = '\0';
}

static void add_ip(char *buf, size_t len, const ASN1_OCTET_STRING *ip)
{
	char text[INET6_ADDRSTRLEN];
	int n = ASN1_STRING_length(ip);
	int af = n == 4 ? AF_INET : n == 16 ? AF_INET6 : 0;

	if (af != 0 && inet_ntop(af, ASN1_STRING_get0_data(ip), text, sizeof(text)) != NULL)
		add_name(buf, len, (const unsigned char *)text, strlen(text));
}

/* The names a certificate carries (its subjectAltName's DNS names and
 * addresses, else its common name) as "a", "b". */
static void cert_names(X509 *cert, char *buf, size_t len)
{
	GENERAL_NAMES *alt;
	int i;

	buf[0] = '\0';
	alt = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; alt != NULL && i < sk_GENERAL_NAME_num(alt); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(alt, i);

		if (g->type == GEN_DNS)
			add_name(buf, len, ASN1_STRING_get0_data(g->d.dNSName),
					(size_t)ASN1_STRING_length(g->d.dNSName));
		else if (g->type == GEN_IPADD)
			add_ip(buf, len, g->d.iPAddress);
	}
	GENERAL_NAMES_free(alt);
	if (buf[0] == '\0') {
		char cn[256];
		int n = X509_NAME_get_text_by_NID(
				X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));

		if (n > 0)
			add_name(buf, len, (const unsigned char *)cn, (size_t)n);
	}
}

/* The names of a certificate refused for its name, seen during this
 * thread's handshake (OpenSSL keeps no peer certificate once it failed). */
static _Thread_local char mismatch_names[200];

static int note_mismatch(int ok, X509_STORE_CTX *store)
{
	int e = X509_STORE_CTX_get_error(store);

	if (!ok && (e == X509_V_ERR_HOSTNAME_MISMATCH || e == X509_V_ERR_IP_ADDRESS_MISMATCH))
		cert_names(X509_STORE_CTX_get0_cert(store), mismatch_names, sizeof(mismatch_names));
	return ok;
}

/* A context of `name` over the SSL_CTX ssl (a reference is taken). */
static int ctx_make(dlock__tls_ctx **out, SSL_CTX *ssl, const char *name)
{
	unsigned char ip[16];
	dlock__tls_ctx *t = dlock__calloc(1, sizeof(*t));

	*out = NULL;
	if (t == NULL || (t->name = dlock__strndup(name, strlen(name))) == NULL) {
		dlock__free(t);
		return dlock__seterr(DLOCK_ENOMEM, "TLS: out of memory");
	}
	t->name_is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
	if (ssl != NULL)
		SSL_CTX_up_ref(ssl);
	t->ssl = ssl;
	*out = t;
	return 0;
}

static _Thread_local char tls_reason[256];

/*
 * Whether an OpenSSL error says the server's first bytes were no TLS record:
 * a plain Redis port answering the hello ("-ERR ..."). Told by reason code,
 * not by its text, which OpenSSL may reword; the code a version gives
 * differs (1.1 and 3.0: wrong version number or packet length too long; 3.2
 * on: record layer failure as well), hence the guards.
 */
static int says_plain_server(unsigned long e)
{
	if (ERR_GET_LIB(e) != ERR_LIB_SSL)
		return 0;
	switch (ERR_GET_REASON(e)) {
#ifdef SSL_R_WRONG_VERSION_NUMBER
	case SSL_R_WRONG_VERSION_NUMBER:
#endif
#ifdef SSL_R_PACKET_LENGTH_TOO_LONG
	case SSL_R_PACKET_LENGTH_TOO_LONG:
#endif
#ifdef SSL_R_RECORD_LAYER_FAILURE
	case SSL_R_RECORD_LAYER_FAILURE:
#endif
		return 1;
	default:
		return 0;
	}
}

/* OpenSSL's queue of errors, taken (cleared): the last one's reason as one
 * short line for messages ("" when empty), and what the codes say. */
typedef struct ssl_errors {
	const char *why;
	int any;   /* the queue had an error */
	int plain; /* one of them: a server without TLS answered */
} ssl_errors;

static void take_errors(ssl_errors *out)
{
	unsigned long e, last = 0;

	out->plain = 0;
	while ((e = ERR_get_error()) != 0) {
		out->plain |= says_plain_server(e);
		last = e;
	}
	out->any = last != 0;
	out->why = "";
	if (last == 0)
		return;
	snprintf(tls_reason, sizeof tls_reason, "%s",
			ERR_reason_error_string(last) ? ERR_reason_error_string(last)
						      : "unknown TLS error");
	out->why = tls_reason;
}

static const char *take_ssl_errors(void)
{
	ssl_errors e;

	take_errors(&e);
	return e.why;
}

/* A file the options name must be readable: say why not in the OS's words
 * (OpenSSL's own reason for a missing file is "system lib"). */
static int readable(const char *what, const char *path)
{
	if (path == NULL || access(path, R_OK) == 0)
		return 0;
	return dlock__seterr(DLOCK_EINVAL, "TLS: cannot read the %s \"%s\": %s", what, path,
			strerror(errno));
}

static int load_files(SSL_CTX *ssl, const dlock__tls_opts *o)
{
	int rc;

	if ((rc = readable("CA file", o->ca_file)) < 0 ||
			(rc = readable("CA directory", o->ca_dir)) < 0 ||
			(rc = readable("client certificate", o->cert_file)) < 0 ||
			(rc = readable("client key", o->key_file)) < 0)
		return rc;
	if (o->ca_file != NULL || o->ca_dir != NULL) {
		if (SSL_CTX_load_verify_locations(ssl, o->ca_file, o->ca_dir) != 1)
			return dlock__seterr(DLOCK_EINVAL, "TLS: cannot load the CA %s \"%s\": %s",
					o->ca_file ? "file" : "directory",
					o->ca_file ? o->ca_file : o->ca_dir,
					take_ssl_errors());
	} else if (SSL_CTX_set_default_verify_paths(ssl) != 1) {
		return dlock__seterr(DLOCK_EINVAL, "TLS: cannot load the system's CAs: %s",
				take_ssl_errors());
	}
	if (o->cert_file == NULL)
		return 0;
	if (SSL_CTX_use_certificate_chain_file(ssl, o->cert_file) != 1)
		return dlock__seterr(DLOCK_EINVAL,
				"TLS: cannot load the client certificate \"%s\": %s",
				o->cert_file, take_ssl_errors());
	if (SSL_CTX_use_PrivateKey_file(ssl, o->key_file, SSL_FILETYPE_PEM) != 1)
		return dlock__seterr(DLOCK_EINVAL, "TLS: cannot load the client key \"%s\": %s",
				o->key_file, take_ssl_errors());
	if (SSL_CTX_check_private_key(ssl) != 1)
		return dlock__seterr(DLOCK_EINVAL,
				"TLS: the key \"%s\" does not belong to the certificate \"%s\"",
				o->key_file, o->cert_file);
	return 0;
}

int dlock__tls_ctx_new(dlock__tls_ctx **out, const dlock__tls_opts *o, const char *host)
{
	const char *name = o->server_name != NULL ? o->server_name : host;
	SSL_CTX *ssl = SSL_CTX_new(TLS_client_method());
	dlock__tls_ctx *t = NULL;
	int rc = ssl == NULL ? dlock__seterr(DLOCK_ENOMEM, "TLS: out of memory")
			     : ctx_make(&t, ssl, name);

	SSL_CTX_free(ssl); /* t holds its own reference */
	*out = NULL;
	if (rc < 0)
		return rc;
	t->named = o->server_name != NULL;
	t->insecure = o->insecure;
	SSL_CTX_set_min_proto_version(t->ssl, TLS1_2_VERSION);
	/* A write that could not finish is retried from a buffer that may have
	 * moved (the output buffer grows) and may be partial. */
	SSL_CTX_set_mode(t->ssl,
			SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_verify(t->ssl, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, note_mismatch);
	rc = load_files(t->ssl, o);
	if (rc < 0) {
		dlock__tls_ctx_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int dlock__tls_ctx_for_host(dlock__tls_ctx **out, const dlock__tls_ctx *base, const char *host)
{
	int rc = ctx_make(out, base->ssl, base->named ? base->name : host);

	if (rc == 0) {
		(*out)->named = base->named;
		(*out)->insecure = base->insecure;
	}
	return rc;
}

void dlock__tls_ctx_free(dlock__tls_ctx *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ssl);
	dlock__free(t->name);
	dlock__free(t);
}

const char *dlock__tls_ctx_describe(const dlock__tls_ctx *t)
{
	return t->insecure ? "TLS, NOT verified (tls_insecure)" : "TLS, verified";
}

/* The certificate must name t->name: a host name, or an IP address as one. */
static int expect_name(SSL *ssl, const dlock__tls_ctx *t)
{
	if (t->insecure)
		return 1;
	if (t->name_is_ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name) == 1;
	return SSL_set_tlsext_host_name(ssl, t->name) == 1 && SSL_set1_host(ssl, t->name) == 1;
}

static const dlock__conn_tls tls_ops; /* below: how the transport calls TLS */

int dlock__tls_start(dlock__conn *c, dlock__tls_ctx *t)
{
	SSL *ssl = SSL_new(t->ssl);

	if (ssl == NULL || SSL_set_fd(ssl, c->fd) != 1 || !expect_name(ssl, t)) {
		SSL_free(ssl);
		c->broken = 1;
		return dlock__seterr_node(DLOCK_ENOMEM, c->label, "TLS: out of memory");
	}
	c->tls = ssl;
	c->tls_ctx = t;
	c->tls_ops = &tls_ops;
	c->want = POLLOUT;
	return 0;
}

/* The certificate is trusted but made out to other names: say which, and
 * how to ask for one of them (a CA would not help). */
static int name_mismatch(dlock__conn *c)
{
	const char *names = mismatch_names;

	return dlock__seterr_node(DLOCK_ECONN, c->label,
			"TLS: the server's certificate is for %s, not \"%s\" (connect by one of "
			"its names, or give one: tls_server_name, --tls-server-name)",
			names[0] != '\0' ? names : "other names", c->tls_ctx->name);
}

/* What a failed handshake means, in words a user can act on. */
static int handshake_failed(dlock__conn *c, SSL *ssl, int ret, int err)
{
	long verify = SSL_get_verify_result(ssl);
	const dlock__tls_ctx *t = c->tls_ctx;
	ssl_errors e;
	int plain, closed;

	take_errors(&e);
	plain = e.plain;
	closed = !plain && (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN || !e.any);

	c->broken = 1;
	/* Refusals no retry changes end a wait at once; a closed connection
	 * (the server restarting?) is ridden out. */
	if (verify != X509_V_OK || !closed)
		dlock__conn_refused(c);
	if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
		return name_mismatch(c);
	if (verify != X509_V_OK)
		return dlock__seterr_node(DLOCK_ECONN, c->label,
				"TLS: the server's certificate is not trusted for \"%s\": %s (give the "
				"CA that signed it: tls_ca_file, --tls-ca)",
				t->name, X509_verify_cert_error_string(verify));
	if (plain)
		return dlock__seterr_node(DLOCK_ECONN, c->label,
				"TLS handshake: the server answered without TLS (%s): is this a "
				"plain port? use redis:// for it",
				e.why);
	if (closed)
		return dlock__seterr_node(DLOCK_ECONN, c->label,
				"TLS handshake: %s (is this the server's TLS port?)",
				ret == 0 || errno == 0 ? "the server closed the connection"
						       : strerror(errno));
	return dlock__seterr_node(DLOCK_ECONN, c->label, "TLS handshake: %s", e.why);
}

int dlock__tls_handshake(dlock__conn *c)
{
	SSL *ssl = c->tls;
	int ret, err;

	ERR_clear_error();
	errno = 0;
	mismatch_names[0] = '\0';
	ret = SSL_connect(ssl);
	if (ret == 1)
		return 0;
	err = SSL_get_error(ssl, ret);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		c->want = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return DLOCK__AGAIN;
	}
	return handshake_failed(c, ssl, ret, err);
}

/* SSL_read/SSL_write's result as recv/send's. */
static ssize_t io_result(dlock__conn *c, int ret)
{
	int err;

	if (ret > 0)
		return ret;
	err = SSL_get_error(c->tls, ret);
	switch (err) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		c->want = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN: /* close_notify: an orderly close */
		return 0;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			/* EOF without close_notify counts as a close, as for TCP. */
			if (errno == 0)
				return 0;
			snprintf(tls_reason, sizeof tls_reason, "%s", strerror(errno));
			return -1;
		}
		/* fall through */
	default:
		take_ssl_errors();
		errno = EPROTO;
		return -1;
	}
}

ssize_t dlock__tls_read(dlock__conn *c, void *buf, size_t len)
{
	ERR_clear_error();
	errno = 0;
	return io_result(c, SSL_read(c->tls, buf, len > INT32_MAX ? INT32_MAX : (int)len));
}

ssize_t dlock__tls_write(dlock__conn *c, const void *buf, size_t len)
{
	ERR_clear_error();
	errno = 0;
	return io_result(c, SSL_write(c->tls, buf, len > INT32_MAX ? INT32_MAX : (int)len));
}

int dlock__tls_pending(const dlock__conn *c)
{
	return c->tls != NULL && SSL_pending(c->tls) > 0;
}

const char *dlock__tls_strerror(void)
{
	return tls_reason[0] ? tls_reason : "TLS error";
}

void dlock__tls_close(dlock__conn *c)
{
	SSL_free(c->tls);
	c->tls = NULL;
}

static const dlock__conn_tls tls_ops = {
	dlock__tls_read,
	dlock__tls_write,
	dlock__tls_pending,
	dlock__tls_strerror,
	dlock__tls_close,
};

#else /* !DLOCK_HAVE_TLS */

int dlock__tls_ctx_new(dlock__tls_ctx **out, const dlock__tls_opts *o, const char *host)
{
	(void)o;
	(void)host;
	*out = NULL;
	return dlock__seterr(DLOCK_EINVAL,
			"TLS (rediss://) is not built into this dlock: rebuild it with OpenSSL "
			"(Debian: libssl-dev)");
}

void dlock__tls_ctx_free(dlock__tls_ctx *t)
{
	(void)t;
}

int dlock__tls_ctx_for_host(dlock__tls_ctx **out, const dlock__tls_ctx *base, const char *host)
{
	(void)base;
	return dlock__tls_ctx_new(out, NULL, host);
}

const char *dlock__tls_ctx_describe(const dlock__tls_ctx *t)
{
	(void)t;
	return "TLS";
}

int dlock__tls_start(dlock__conn *c, dlock__tls_ctx *t)
{
	(void)t;
	c->broken = 1;
	return dlock__seterr_node(DLOCK_EINVAL, c->label, "TLS is not built in");
}

int dlock__tls_handshake(dlock__conn *c)
{
	return dlock__tls_start(c, NULL);
}

ssize_t dlock__tls_read(dlock__conn *c, void *buf, size_t len)
{
	(void)c;
	(void)buf;
	(void)len;
	errno = EPROTO;
	return -1;
}

ssize_t dlock__tls_write(dlock__conn *c, const void *buf, size_t len)
{
	return dlock__tls_read(c, (void *)buf, len);
}

int dlock__tls_pending(const dlock__conn *c)
{
	(void)c;
	return 0;
}

const char *dlock__tls_strerror(void)
{
	return "TLS is not built in";
}

void dlock__tls_close(dlock__conn *c)
{
	(void)c;
}

#endif
