/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/client.hpp - dlock::client, a client on one server.
 */
#ifndef DLOCK_CPP_CLIENT_HPP
#define DLOCK_CPP_CLIENT_HPP

#include "error.hpp"

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>

namespace dlock {

/** A client on one server: a URI (see dlock_client_new) and options. */
class client {
public:
	/** Open a client; `opts` (NULL: defaults) is copied. Throws dlock::error. */
	explicit client(const std::string &uri, const dlock_client_options *opts = nullptr)
	{
		int rc = open(uri, opts);
		if (rc != 0)
			detail::throw_error(rc);
	}
	/** As above; on failure ec is set and the client is empty (false). */
	client(const std::string &uri, const dlock_client_options *opts, std::error_code &ec) noexcept
	{
		detail::set_code(ec, open(uri, opts));
	}

	client(client &&) noexcept = default;
	client &operator=(client &&) noexcept = default;
	client(const client &) = delete;
	client &operator=(const client &) = delete;
	/* Closes the client once no lock made from it is left. */
	~client() = default;

	explicit operator bool() const noexcept { return static_cast<bool>(h_); }
	dlock_client *native() const noexcept { return h_.get(); }
	/** The client's UUID, and the "host:port" its messages name. */
	const char *id() const noexcept { return h_ ? dlock_client_id(h_.get()) : ""; }
	const char *node() const noexcept { return h_ ? dlock_client_node(h_.get()) : ""; }

	/** An owner name for the calls that take one (acquire_async()):
	 *  Redisson's `<client uuid>:<id>`. Throws dlock::error (empty client). */
	std::string owner(std::uint64_t id) const
	{
		char buf[DLOCK_OWNER_SIZE];
		int rc = dlock_client_owner(buf, native(), id);
		if (rc < 0)
			detail::throw_error(rc);
		return std::string(buf);
	}

	/** PING the server. */
	void ping()
	{
		int rc = dlock_client_ping(native());
		if (rc != 0)
			detail::throw_error(rc);
	}
	void ping(std::error_code &ec) noexcept { detail::set_code(ec, dlock_client_ping(native())); }

	/** End every wait in progress on this client with errc::canceled. */
	void cancel_waits() noexcept { dlock_client_cancel_waits(native()); }

private:
	friend class rlock;
	friend class semaphore;
	friend class countdown_latch;

	int open(const std::string &uri, const dlock_client_options *opts) noexcept
	{
		try {
			dlock_client *c = nullptr;
			int rc = dlock_client_new(&c, uri.c_str(), opts);
			if (rc == 0)
				h_.reset(c, [](dlock_client *p) { dlock_client_free(p); });
			return rc;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	std::shared_ptr<dlock_client> h_;
};

} // namespace dlock

#endif
