// One small API over libgpiod v1 (Debian 12 / Raspberry Pi OS bookworm:
// libgpiod 1.6) and v2 (Debian 13 trixie: libgpiod 2.x). Both ship their
// header as <gpiod.h> with different APIs, so only the C preprocessor can
// choose (gpio_bridge.c); Swift (Sources/GPIO) sees this API alone.
//
// Functions return -1 (or NULL) with errno set on failure; they never
// print. Not thread-safe per line: one thread uses a line at a time.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// A requested line and what it takes to use it; free with sb_gpio_release.
typedef struct sb_gpio_line sb_gpio_line;

enum sb_gpio_bias { SB_GPIO_BIAS_AS_IS = 0, SB_GPIO_BIAS_DISABLE, SB_GPIO_BIAS_PULL_UP, SB_GPIO_BIAS_PULL_DOWN };

/// Requests line `offset` of `chip` (a name like "gpiochip0", a /dev path,
/// a label like "pinctrl-rp1", or a number) for `consumer`: an input that
/// reports both edges (`output` false), or an output set to `initial`
/// (logical). `active_low` makes values and edges logical. On failure
/// returns NULL, sets errno, points `*call` at the name of the libgpiod
/// call that failed and, when the line is busy, writes who holds it into
/// `holder` (empty otherwise).
sb_gpio_line *sb_gpio_request(const char *chip, unsigned int offset, bool output, bool active_low, int bias, bool initial,
                              const char *consumer, const char **call, char *holder, size_t holder_size);

/// Releases the line and closes its chip. NULL is fine.
void sb_gpio_release(sb_gpio_line *line);

/// A descriptor that polls readable when an edge is queued (inputs).
int sb_gpio_fd(const sb_gpio_line *line);

/// The logical value (0 or 1), or -1.
int sb_gpio_get(sb_gpio_line *line);

/// Sets the logical value; 0 or -1.
int sb_gpio_set(sb_gpio_line *line, bool value);

/// Takes one queued edge without blocking: 1 (filled in: `rising` = became
/// active, `ns` = CLOCK_MONOTONIC nanoseconds), 0 when none is queued, -1.
int sb_gpio_read_edge(sb_gpio_line *line, bool *rising, uint64_t *ns);

/// "1.6.3", "2.2.1": the libgpiod this binary runs against.
const char *sb_gpio_library_version(void);

/// 1 or 2: the libgpiod API this binary was built for.
int sb_gpio_api(void);
