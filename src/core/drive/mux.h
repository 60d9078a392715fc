/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The multiplexer moved to core/mux/ (a layer below the client): this name
 * stays only for the includes of src/multilock/ not yet moved to it. New
 * code includes core/mux/mux.h.
 */
#ifndef DLOCK_CORE_DRIVE_MUX_FORWARD_H
#define DLOCK_CORE_DRIVE_MUX_FORWARD_H

#include "core/mux/mux.h"

#endif
