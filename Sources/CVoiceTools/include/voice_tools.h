// The voice-pack builder's audio tools (soundboxctl voice build / voice
// check): reading recordings (libsndfile), resampling (libsoxr), loudness
// and true peak (libebur128, ITU-R BS.1770) and mp3 encoding (libmp3lame),
// each a well-kept Debian library. They are loaded with dlopen on first use
// (vt_load), not linked: soundboxctl on a box, and its package, need none of
// them; a vendor's workstation installs them for building packs.
//
// Buffers returned are malloc'd (free them); errors are written to `err`.
#pragma once
#include <stddef.h>

/// Loads the four libraries; NULL when all are there, else which are
/// missing (a static string naming the Debian packages to install).
const char *vt_load(void);

/// Reads a recording (WAV, FLAC, ... whatever libsndfile reads) from the
/// open descriptor `fd` (a regular file the caller opened, checked and
/// closes: libsndfile's own open would block on a FIFO) as mono float
/// samples (channels averaged) at its own rate.
float *vt_read_mono(int fd, int *rate, long *frames, char *err, size_t errlen);

/// Resamples mono float samples from `in_rate` to `out_rate` (soxr, high quality).
float *vt_resample(const float *in, long frames, int in_rate, int out_rate, long *out_frames, char *err, size_t errlen);

/// BS.1770 loudness of the clip (EBU R128's gated integrated loudness of
/// the clip looped to 2 s, so that a clip shorter than one 400 ms block is
/// measured whole) in LUFS, and its true peak (4x oversampled, linear).
/// 0 on success.
int vt_loudness(const float *x, long frames, int rate, double *lufs, double *true_peak, char *err, size_t errlen);

/// Encodes mono 16-bit samples as a VBR mp3 (`quality` 0 best … 9) with
/// the Xing/LAME tag that carries the encoder delay and padding (gapless
/// decoding). Returns the file's bytes.
unsigned char *vt_encode_mp3(const short *pcm, long frames, int rate, int quality, long *out_len, char *err, size_t errlen);
