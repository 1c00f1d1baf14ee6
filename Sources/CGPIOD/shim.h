// CGPIOD: the C API of libgpiod as the build machine has it: v1 (Debian 12,
// libgpiod-dev 1.6) or v2 (Debian 13, 2.x). Only CGPIOBridge includes it.
#pragma once
#include <gpiod.h>
