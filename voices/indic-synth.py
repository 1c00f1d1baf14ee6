#!/usr/bin/env python3
"""The text espeak-ng speaks for each clip of an Indic grammar.

    soundboxctl voice clips --lang ta-IN | voices/indic-synth.py ta-IN

Reads clip names (one a line), writes "clip|text" lines for
voices/make-voices.sh. A clip is a word, a phrase (words joined with "_"),
or a piece of a word the grammar splits (docs/grammars.md: Tamil's
இரண்டா + யிரம், Kannada's ನೂರ + ೈದು, ನೂರ + ್ನಾಲ್ಕು). A piece cannot be
spoken as written when it opens with a vowel sign or a virama: the vowel
sign is spoken as its vowel (ೈದು as ಐದು), the virama is dropped (್ನಾಲ್ಕು as
ನಾಲ್ಕು). Where espeak-ng's voice does not know a letter the library
writes, the text uses the letter the voice reads (SPELLING below).
"""
import sys

# espeak-ng 1.51's voices and the letters they do not read (they spell out
# the letter's name, or skip it): the same sound in a letter they read.
# (Found by reading each clip's phonemes, `espeak-ng -x`: a letter's name
# in them, or a switch to another language, is a letter the voice lacks.)
SPELLING = {
    # Assamese: the library's Bengali র, where Assamese writes ৰ; য় as the
    # one code point the voice knows (NFC splits it into য + nukta).
    "as-IN": {"\u09B0": "\u09F0", "\u09AF\u09BC": "\u09DF"},
    # Odia: ୱ (wa, in ନେଟୱାର୍କ) as ଵ, the letter the voice reads for it.
    "or-IN": {"\u0B71": "\u0B35"},
    # Marathi writes हजार; the library's nukta (ज़) is Hindi's spelling.
    "mr-IN": {"\u095B": "\u091C"},
    # Urdu: the library's Arabic yeh and kaf, where Urdu writes ی and ک.
    "ur-IN": {"\u064A": "\u06CC", "\u0643": "\u06A9"},
}

# Whole clips a voice would spell letter by letter: a word of one letter.
WHOLE = {
    "as-IN": {"\u09A8": "\u09A8\u09CB"},   # 9, ন: said নো
}

# The Indic blocks (Devanagari to Malayalam) share one layout: the vowel
# signs U+xx3E-U+xx4C sit 0x38 above their independent vowels, the virama at
# U+xx4D.
BLOCKS = range(0x0900, 0x0D80)


def speakable(clip, lang):
    if clip in WHOLE.get(lang, {}):
        return WHOLE[lang][clip]
    text = clip.replace("_", " ")
    for a, b in SPELLING.get(lang, {}).items():
        text = text.replace(a, b)
    text = text.lstrip("\u200c\u200d")
    if text:
        c = ord(text[0])
        if c in BLOCKS and c & 0x7F == 0x4D:
            text = text[1:]
        elif c in BLOCKS and 0x3E <= c & 0x7F <= 0x4C:
            text = chr(c - 0x38) + text[1:]
    # (not normalized again: NFC would split the Assamese য় once more)
    return text


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: indic-synth.py LANG < clips")
    lang = sys.argv[1]
    for line in sys.stdin:
        clip = line.rstrip("\n")
        if clip:
            print(f"{clip}|{speakable(clip, lang)}")


if __name__ == "__main__":
    main()
