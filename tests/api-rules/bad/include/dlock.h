/* One or more breaches of each rule ci/api-rules.sh checks (see expected.txt). */
#ifndef DLOCK_H
#define DLOCK_H
#include "dlock/common.h"
#include "dlock/async.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#endif
