/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/error.hpp - dlock::error, dlock::errc and dlock::category(): how
 * the C++ classes report a failure (see <dlock.hpp>), and the helpers that
 * turn the C calls' codes and waits into them.
 */
#ifndef DLOCK_CPP_ERROR_HPP
#define DLOCK_CPP_ERROR_HPP

#include <dlock.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

namespace dlock {

/** The DLOCK_E* codes as an enum, for comparing with an error's code(). */
enum class errc : int {
	invalid_argument = DLOCK_EINVAL,
	out_of_memory = DLOCK_ENOMEM,
	connection = DLOCK_ECONN,
	timed_out = DLOCK_ETIMEDOUT,
	auth = DLOCK_EAUTH,
	server = DLOCK_ESERVER,
	wrong_type = DLOCK_EWRONGTYPE,
	protocol = DLOCK_EPROTO,
	not_acquired = DLOCK_ENOTACQUIRED,
	not_owner = DLOCK_ENOTOWNER,
	lost = DLOCK_ELOST,
	no_quorum = DLOCK_ENOQUORUM,
	expired = DLOCK_EEXPIRED,
	system = DLOCK_ESYS,
	canceled = DLOCK_ECANCELED,
	forked = DLOCK_EFORKED,
	busy = DLOCK_EBUSY,
	no_sync = DLOCK_ENOSYNC,
	duplicate = DLOCK_EDUPLICATE
};

namespace detail {

class category_impl final : public std::error_category {
public:
	const char *name() const noexcept override { return "dlock"; }
	std::string message(int ev) const override { return dlock_strerror(ev); }
	/* The codes the standard names too, so `ec == std::errc::timed_out` holds. */
	std::error_condition default_error_condition(int ev) const noexcept override
	{
		switch (ev) {
		case DLOCK_EINVAL: return std::errc::invalid_argument;
		case DLOCK_ENOMEM: return std::errc::not_enough_memory;
		case DLOCK_ETIMEDOUT: return std::errc::timed_out;
		case DLOCK_ECANCELED: return std::errc::operation_canceled;
		case DLOCK_EBUSY: return std::errc::device_or_resource_busy;
		default: return std::error_condition(ev, *this);
		}
	}
};

} // namespace detail

/** The category of dlock's codes: message() is dlock_strerror(). */
inline const std::error_category &category() noexcept
{
	static const detail::category_impl instance;
	return instance;
}

inline std::error_code make_error_code(errc e) noexcept
{
	return std::error_code(static_cast<int>(e), category());
}

/** The calling thread's last failure line (dlock_errmsg_last()), copied. */
inline std::string last_error_message()
{
	char buf[256];
	std::size_t n = dlock_errmsg_last_r(buf, sizeof buf);
	if (n < sizeof buf)
		return std::string(buf, n);
	std::string line(n + 1, '\0');
	dlock_errmsg_last_r(&line[0], line.size());
	line.resize(n);
	return line;
}

/**
 * A failed dlock call: code() is the DLOCK_E* code in dlock::category(),
 * what() the library's one line for it (the code's description when the
 * library gave none).
 */
class error : public std::system_error {
public:
	error(int code, const std::string &line)
		: std::system_error(code, category(), line),
		  line_(line.empty() ? std::string(dlock_strerror(code)) : line)
	{
	}
	const char *what() const noexcept override { return line_.what(); }

private:
	std::runtime_error line_; /* a copy that cannot throw, as exceptions need */
};

} // namespace dlock

namespace std {
template <> struct is_error_code_enum<dlock::errc> : true_type {
};
} // namespace std

namespace dlock {

namespace detail {

[[noreturn]] inline void throw_error(int rc)
{
	throw error(rc, last_error_message());
}

inline void set_code(std::error_code &ec, int rc) noexcept
{
	if (rc == 0)
		ec.clear();
	else
		ec.assign(rc, category());
}

inline void check(int rc)
{
	if (rc != 0)
		throw_error(rc);
}

/* A call whose `miss` code is an answer (false: not acquired, timed out),
 * not a failure; in the second form ec is then clear. */
inline bool answered(int rc, int miss)
{
	if (rc == miss)
		return false;
	check(rc);
	return true;
}
inline bool answered(int rc, int miss, std::error_code &ec) noexcept
{
	set_code(ec, rc == miss ? 0 : rc);
	return rc == 0;
}

/* A wait in whole milliseconds, rounded up so a wait is never shorter than
 * asked; none for a negative one, and no limit past ~285,000 years. */
template <class Rep, class Period>
std::int64_t wait_ms(const std::chrono::duration<Rep, Period> &d) noexcept
{
	if (d <= d.zero())
		return 0;
	if (std::chrono::duration<double, std::milli>(d).count() >= 9e15)
		return DLOCK_WAIT_FOREVER;
	return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

/* Wait until `t` on its own clock, which may be adjusted meanwhile: call
 * attempt(wait in ms) again while it ends with `miss` (the wait ran out)
 * and the clock says the time has not come. */
template <class Clock, class Duration, class Attempt>
int until(const std::chrono::time_point<Clock, Duration> &t, int miss, Attempt attempt) noexcept
{
	for (;;) {
		int rc = attempt(wait_ms(t - Clock::now()));
		if (rc != miss || Clock::now() >= t)
			return rc;
	}
}

} // namespace detail

/** A lease meaning "no lease": the client's watchdog renews the hold. */
inline constexpr std::chrono::milliseconds watchdog{DLOCK_LEASE_WATCHDOG};

} // namespace dlock

#endif
