// CGPIOD: the C API of libgpiod, v1 API, as Debian 12 ships it (libgpiod-dev 1.6.3).
#pragma once
#include <gpiod.h>
