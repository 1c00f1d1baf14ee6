// See include/voice_tools.h.
#include "voice_tools.h"

#include <dlfcn.h>
#include <ebur128.h>
#include <lame/lame.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN(name) static __typeof__(&name) p_##name
FN(sf_open_fd); FN(sf_readf_float); FN(sf_close); FN(sf_strerror);
FN(soxr_oneshot); FN(soxr_io_spec); FN(soxr_quality_spec);
FN(ebur128_init); FN(ebur128_destroy); FN(ebur128_add_frames_float); FN(ebur128_loudness_global); FN(ebur128_true_peak);
FN(lame_init); FN(lame_close); FN(lame_set_in_samplerate); FN(lame_set_out_samplerate); FN(lame_set_num_channels);
FN(lame_set_mode); FN(lame_set_VBR); FN(lame_set_VBR_quality); FN(lame_set_bWriteVbrTag); FN(lame_init_params);
FN(lame_encode_buffer); FN(lame_encode_flush); FN(lame_get_lametag_frame);

static void fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *vt_load(void) {
    static int loaded;
    if (loaded) return NULL;
    void *sf = dlopen("libsndfile.so.1", RTLD_NOW | RTLD_LOCAL);
    void *sr = dlopen("libsoxr.so.0", RTLD_NOW | RTLD_LOCAL);
    void *eb = dlopen("libebur128.so.1", RTLD_NOW | RTLD_LOCAL);
    void *lm = dlopen("libmp3lame.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!sf || !sr || !eb || !lm)
        return "building voice packs needs libsndfile, libsoxr, libebur128 and libmp3lame: "
               "apt-get install libsndfile1 libsoxr0 libebur128-1 libmp3lame0";
#define LOAD(lib, name) if (!(p_##name = (__typeof__(&name))dlsym(lib, #name))) return "a voice library lacks " #name;
    LOAD(sf, sf_open_fd) LOAD(sf, sf_readf_float) LOAD(sf, sf_close) LOAD(sf, sf_strerror)
    LOAD(sr, soxr_oneshot) LOAD(sr, soxr_io_spec) LOAD(sr, soxr_quality_spec)
    LOAD(eb, ebur128_init) LOAD(eb, ebur128_destroy) LOAD(eb, ebur128_add_frames_float) LOAD(eb, ebur128_loudness_global)
    LOAD(eb, ebur128_true_peak)
    LOAD(lm, lame_init) LOAD(lm, lame_close) LOAD(lm, lame_set_in_samplerate) LOAD(lm, lame_set_out_samplerate)
    LOAD(lm, lame_set_num_channels) LOAD(lm, lame_set_mode) LOAD(lm, lame_set_VBR) LOAD(lm, lame_set_VBR_quality)
    LOAD(lm, lame_set_bWriteVbrTag) LOAD(lm, lame_init_params) LOAD(lm, lame_encode_buffer) LOAD(lm, lame_encode_flush)
    LOAD(lm, lame_get_lametag_frame)
#undef LOAD
    loaded = 1;
    return NULL;
}

float *vt_read_mono(int fd, int *rate, long *frames, char *err, size_t errlen) {
    SF_INFO info = {0};
    SNDFILE *f = p_sf_open_fd(fd, SFM_READ, &info, 0);   /* the caller closes fd */
    if (!f) { fail(err, errlen, "%s", p_sf_strerror(NULL)); return NULL; }
    if (info.channels < 1 || info.channels > 8 || info.frames <= 0 || info.frames > 48000L * 60 || info.samplerate < 8000 || info.samplerate > 192000) {
        fail(err, errlen, "%d channels, %ld frames at %d Hz: expected 1-8 channels, up to a minute, 8-192 kHz",
             info.channels, (long)info.frames, info.samplerate);
        p_sf_close(f);
        return NULL;
    }
    float *all = malloc(sizeof(float) * (size_t)info.frames * (size_t)info.channels);
    float *mono = malloc(sizeof(float) * (size_t)info.frames);
    if (!all || !mono) { free(all); free(mono); p_sf_close(f); fail(err, errlen, "out of memory"); return NULL; }
    sf_count_t got = p_sf_readf_float(f, all, info.frames);
    p_sf_close(f);
    for (sf_count_t i = 0; i < got; i++) {
        double sum = 0;
        for (int c = 0; c < info.channels; c++) sum += all[i * info.channels + c];
        mono[i] = (float)(sum / info.channels);
    }
    free(all);
    *rate = info.samplerate;
    *frames = (long)got;
    return mono;
}

float *vt_resample(const float *in, long frames, int in_rate, int out_rate, long *out_frames, char *err, size_t errlen) {
    size_t cap = (size_t)((double)frames * out_rate / in_rate) + 64;
    float *out = malloc(sizeof(float) * cap);
    if (!out) { fail(err, errlen, "out of memory"); return NULL; }
    if (in_rate == out_rate) { memcpy(out, in, sizeof(float) * (size_t)frames); *out_frames = frames; return out; }
    soxr_io_spec_t io = p_soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = p_soxr_quality_spec(SOXR_HQ, 0);
    size_t done = 0;
    soxr_error_t e = p_soxr_oneshot(in_rate, out_rate, 1, in, (size_t)frames, NULL, out, cap, &done, &io, &q, NULL);
    if (e) { free(out); fail(err, errlen, "soxr: %s", e); return NULL; }
    *out_frames = (long)done;
    return out;
}

int vt_loudness(const float *x, long frames, int rate, double *lufs, double *true_peak, char *err, size_t errlen) {
    if (frames <= 0) { fail(err, errlen, "no samples"); return -1; }
    ebur128_state *st = p_ebur128_init(1, (unsigned long)rate, EBUR128_MODE_I | EBUR128_MODE_TRUE_PEAK);
    if (!st) { fail(err, errlen, "ebur128_init failed"); return -1; }
    // The clip looped to at least 2 s: R128's 400 ms blocks then cover every
    // part of it evenly, however short it is, and its integrated loudness is
    // the clip's. (ebur128_set_max_window would measure one window of the
    // clip's length, but libebur128 1.2.6 allocates and clears 1000 times
    // the memory it needs there: 180 MB for a second.)
    long total = 0;
    int rc = EBUR128_SUCCESS;
    while (rc == EBUR128_SUCCESS && (total < 2L * rate || total == 0)) {
        rc = p_ebur128_add_frames_float(st, x, (size_t)frames);
        total += frames;
    }
    if (rc == EBUR128_SUCCESS) rc = p_ebur128_loudness_global(st, lufs);
    if (rc == EBUR128_SUCCESS) rc = p_ebur128_true_peak(st, 0, true_peak);
    p_ebur128_destroy(&st);
    if (rc != EBUR128_SUCCESS) { fail(err, errlen, "ebur128 error %d", rc); return -1; }
    return 0;
}

unsigned char *vt_encode_mp3(const short *pcm, long frames, int rate, int quality, long *out_len, char *err, size_t errlen) {
    lame_global_flags *g = p_lame_init();
    if (!g) { fail(err, errlen, "lame_init failed"); return NULL; }
    p_lame_set_in_samplerate(g, rate);
    p_lame_set_out_samplerate(g, rate);
    p_lame_set_num_channels(g, 1);
    p_lame_set_mode(g, MONO);
    p_lame_set_VBR(g, vbr_default);
    p_lame_set_VBR_quality(g, (float)quality);
    p_lame_set_bWriteVbrTag(g, 1);
    if (p_lame_init_params(g) < 0) { p_lame_close(g); fail(err, errlen, "lame_init_params refused %d Hz", rate); return NULL; }
    size_t cap = (size_t)(1.25 * frames) + 7200 + 8192;
    unsigned char *out = malloc(cap);
    if (!out) { p_lame_close(g); fail(err, errlen, "out of memory"); return NULL; }
    int n = p_lame_encode_buffer(g, pcm, pcm, (int)frames, out, (int)cap);
    if (n < 0) { free(out); p_lame_close(g); fail(err, errlen, "lame_encode_buffer: %d", n); return NULL; }
    int m = p_lame_encode_flush(g, out + n, (int)(cap - (size_t)n));
    if (m < 0) { free(out); p_lame_close(g); fail(err, errlen, "lame_encode_flush: %d", m); return NULL; }
    // The first frame was a placeholder: the tag with the real delay and padding replaces it.
    unsigned char tag[8192];
    size_t t = p_lame_get_lametag_frame(g, tag, sizeof tag);
    if (t > 0 && t <= (size_t)(n + m)) memcpy(out, tag, t);
    p_lame_close(g);
    *out_len = n + m;
    return out;
}
