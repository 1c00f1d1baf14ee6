// CSQLite: the C API of SQLite, as Debian 12 ships it (libsqlite3-dev 3.40.1).
#pragma once
#include <sqlite3.h>
