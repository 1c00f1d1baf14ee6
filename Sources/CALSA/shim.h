// CALSA: the C API of ALSA (alsa-lib), as Debian 12 ships it (libasound2-dev 1.2.8).
#pragma once
#include <alsa/asoundlib.h>
