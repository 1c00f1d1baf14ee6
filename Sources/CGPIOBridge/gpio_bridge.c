// libgpiod v1 or v2 behind gpio_bridge.h, chosen by the header found at
// build time: v1's <gpiod.h> defines GPIOD_LINE_BULK_MAX_LINES, v2's does not.
#include "gpio_bridge.h"

#include <errno.h>
#include <gpiod.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note_holder(const char *consumer, char *holder, size_t size) {
    if (holder && size) snprintf(holder, size, "%s", consumer ? consumer : "");
}

static int poll_ready(int fd) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n;
    do { n = poll(&p, 1, 0); } while (n < 0 && errno == EINTR);
    return n;
}

#ifdef GPIOD_LINE_BULK_MAX_LINES   /* ---------------- libgpiod 1.x ---------------- */

struct sb_gpio_line {
    struct gpiod_chip *chip;
    struct gpiod_line *line;
};

sb_gpio_line *sb_gpio_request(const char *chip, unsigned int offset, bool output, bool active_low, int bias, bool initial,
                              const char *consumer, const char **call, char *holder, size_t holder_size) {
    note_holder(NULL, holder, holder_size);
    sb_gpio_line *l = calloc(1, sizeof *l);
    if (!l) { *call = "calloc"; return NULL; }
    l->chip = gpiod_chip_open_lookup(chip);   // name, path, label or number
    if (!l->chip) { *call = "gpiod_chip_open_lookup"; free(l); return NULL; }
    l->line = gpiod_chip_get_line(l->chip, offset);
    if (!l->line) { *call = "gpiod_chip_get_line"; goto fail; }
    int flags = active_low ? GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW : 0;
    switch (bias) {
    case SB_GPIO_BIAS_DISABLE: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE; break;
    case SB_GPIO_BIAS_PULL_UP: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP; break;
    case SB_GPIO_BIAS_PULL_DOWN: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN; break;
    default: break;
    }
    int rc = output ? gpiod_line_request_output_flags(l->line, consumer, flags, initial ? 1 : 0)
                    : gpiod_line_request_both_edges_events_flags(l->line, consumer, flags);
    if (rc != 0) {
        *call = output ? "gpiod_line_request_output_flags" : "gpiod_line_request_both_edges_events_flags";
        int e = errno;
        if (e == EBUSY) note_holder(gpiod_line_consumer(l->line), holder, holder_size);
        errno = e;
        goto fail;
    }
    return l;
fail:;
    int e = errno;
    gpiod_chip_close(l->chip);
    free(l);
    errno = e;
    return NULL;
}

void sb_gpio_release(sb_gpio_line *l) {
    if (!l) return;
    gpiod_line_release(l->line);
    gpiod_chip_close(l->chip);
    free(l);
}

int sb_gpio_fd(const sb_gpio_line *l) { return gpiod_line_event_get_fd(l->line); }
int sb_gpio_get(sb_gpio_line *l) { return gpiod_line_get_value(l->line); }
int sb_gpio_set(sb_gpio_line *l, bool value) { return gpiod_line_set_value(l->line, value ? 1 : 0); }

int sb_gpio_read_edge(sb_gpio_line *l, bool *rising, uint64_t *ns) {
    int ready = poll_ready(gpiod_line_event_get_fd(l->line));
    if (ready <= 0) return ready;
    struct gpiod_line_event ev;
    if (gpiod_line_event_read(l->line, &ev) != 0) return -1;
    // With ACTIVE_LOW the kernel reports edges in logical terms already.
    *rising = ev.event_type == GPIOD_LINE_EVENT_RISING_EDGE;
    *ns = (uint64_t)ev.ts.tv_sec * 1000000000u + (uint64_t)ev.ts.tv_nsec;
    return 1;
}

const char *sb_gpio_library_version(void) { return gpiod_version_string(); }
int sb_gpio_api(void) { return 1; }

#else   /* ---------------- libgpiod 2.x ---------------- */

#include <dirent.h>

struct sb_gpio_line {
    struct gpiod_chip *chip;
    struct gpiod_line_request *request;
    unsigned int offset;
    struct gpiod_edge_event_buffer *events;
};

/// v2 opens chips by path only; v1 also took a name, a number or a label.
static struct gpiod_chip *open_chip(const char *spec) {
    char path[64];
    if (spec[0] == '/') return gpiod_chip_open(spec);
    if (strspn(spec, "0123456789") == strlen(spec) && spec[0]) {
        snprintf(path, sizeof path, "/dev/gpiochip%s", spec);
        return gpiod_chip_open(path);
    }
    if (strncmp(spec, "gpiochip", 8) == 0 && strlen(spec) < 40) {
        snprintf(path, sizeof path, "/dev/%s", spec);
        struct gpiod_chip *c = gpiod_chip_open(path);
        if (c || errno != ENOENT) return c;
    }
    // A label (Raspberry Pi 5: "pinctrl-rp1"): look at every chip.
    DIR *dir = opendir("/dev");
    if (!dir) return NULL;
    struct gpiod_chip *found = NULL;
    for (struct dirent *d; !found && (d = readdir(dir));) {
        if (strncmp(d->d_name, "gpiochip", 8) != 0 || strlen(d->d_name) >= 40) continue;
        snprintf(path, sizeof path, "/dev/%s", d->d_name);
        struct gpiod_chip *c = gpiod_chip_open(path);
        if (!c) continue;
        struct gpiod_chip_info *info = gpiod_chip_get_info(c);
        if (info && strcmp(gpiod_chip_info_get_label(info), spec) == 0) found = c; else gpiod_chip_close(c);
        gpiod_chip_info_free(info);
    }
    closedir(dir);
    if (!found) errno = ENOENT;
    return found;
}

sb_gpio_line *sb_gpio_request(const char *chip, unsigned int offset, bool output, bool active_low, int bias, bool initial,
                              const char *consumer, const char **call, char *holder, size_t holder_size) {
    note_holder(NULL, holder, holder_size);
    sb_gpio_line *l = calloc(1, sizeof *l);
    if (!l) { *call = "calloc"; return NULL; }
    l->offset = offset;
    struct gpiod_line_settings *settings = NULL;
    struct gpiod_line_config *config = NULL;
    struct gpiod_request_config *request = NULL;
    l->chip = open_chip(chip);
    if (!l->chip) { *call = "gpiod_chip_open"; free(l); return NULL; }
    settings = gpiod_line_settings_new();
    config = gpiod_line_config_new();
    request = gpiod_request_config_new();
    if (!settings || !config || !request) { *call = "gpiod_line_settings_new"; goto fail; }
    gpiod_line_settings_set_active_low(settings, active_low);
    static const enum gpiod_line_bias biases[] = { GPIOD_LINE_BIAS_AS_IS, GPIOD_LINE_BIAS_DISABLED, GPIOD_LINE_BIAS_PULL_UP, GPIOD_LINE_BIAS_PULL_DOWN };
    gpiod_line_settings_set_bias(settings, biases[bias >= 0 && bias <= 3 ? bias : 0]);
    if (output) {
        gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_OUTPUT);
        gpiod_line_settings_set_output_value(settings, initial ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
    } else {
        gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_INPUT);
        gpiod_line_settings_set_edge_detection(settings, GPIOD_LINE_EDGE_BOTH);
        gpiod_line_settings_set_event_clock(settings, GPIOD_LINE_CLOCK_MONOTONIC);
        l->events = gpiod_edge_event_buffer_new(1);
        if (!l->events) { *call = "gpiod_edge_event_buffer_new"; goto fail; }
    }
    if (gpiod_line_config_add_line_settings(config, &offset, 1, settings) != 0) { *call = "gpiod_line_config_add_line_settings"; goto fail; }
    gpiod_request_config_set_consumer(request, consumer);
    l->request = gpiod_chip_request_lines(l->chip, request, config);
    if (!l->request) {
        *call = "gpiod_chip_request_lines";
        int e = errno;
        if (e == EBUSY) {
            struct gpiod_line_info *info = gpiod_chip_get_line_info(l->chip, offset);
            if (info) { note_holder(gpiod_line_info_get_consumer(info), holder, holder_size); gpiod_line_info_free(info); }
        }
        errno = e;
        goto fail;
    }
    gpiod_line_settings_free(settings);
    gpiod_line_config_free(config);
    gpiod_request_config_free(request);
    return l;
fail:;
    int e = errno;
    gpiod_line_settings_free(settings);
    gpiod_line_config_free(config);
    gpiod_request_config_free(request);
    gpiod_edge_event_buffer_free(l->events);
    gpiod_chip_close(l->chip);
    free(l);
    errno = e;
    return NULL;
}

void sb_gpio_release(sb_gpio_line *l) {
    if (!l) return;
    gpiod_line_request_release(l->request);
    gpiod_edge_event_buffer_free(l->events);
    gpiod_chip_close(l->chip);
    free(l);
}

int sb_gpio_fd(const sb_gpio_line *l) { return gpiod_line_request_get_fd(l->request); }

int sb_gpio_get(sb_gpio_line *l) {
    enum gpiod_line_value v = gpiod_line_request_get_value(l->request, l->offset);
    return v == GPIOD_LINE_VALUE_ERROR ? -1 : v == GPIOD_LINE_VALUE_ACTIVE;
}

int sb_gpio_set(sb_gpio_line *l, bool value) {
    return gpiod_line_request_set_value(l->request, l->offset, value ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
}

int sb_gpio_read_edge(sb_gpio_line *l, bool *rising, uint64_t *ns) {
    if (!l->events) { errno = EINVAL; return -1; }
    int ready = poll_ready(gpiod_line_request_get_fd(l->request));
    if (ready <= 0) return ready;
    int n = gpiod_line_request_read_edge_events(l->request, l->events, 1);
    if (n <= 0) return n;
    struct gpiod_edge_event *ev = gpiod_edge_event_buffer_get_event(l->events, 0);
    // Edges are logical: with active-low the kernel swaps them.
    *rising = gpiod_edge_event_get_event_type(ev) == GPIOD_EDGE_EVENT_RISING_EDGE;
    *ns = gpiod_edge_event_get_timestamp_ns(ev);
    return 1;
}

const char *sb_gpio_library_version(void) { return gpiod_api_version(); }
int sb_gpio_api(void) { return 2; }

#endif
