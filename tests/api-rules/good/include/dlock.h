/* A minimal API shaped by docs/api-rules.md: ci/api-rules.sh finds nothing here. */
#ifndef DLOCK_H
#define DLOCK_H
#include "dlock/common.h"
#include "dlock/errors.h"
#include "dlock/async.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#endif
