// CMPG123: the C API of libmpg123, as Debian 12 ships it (libmpg123-dev 1.31.2).
#pragma once
#include <mpg123.h>
