#!/usr/bin/env python3
"""Generate Tests/SoundboxTests/ReferenceTables.swift from the reference libraries.

    pip install cn2an num2words indic-numtowords
    python3 scripts/reference-tables.py > Tests/SoundboxTests/ReferenceTables.swift

Each table row maps an amount text (exact decimal, at most 2 decimals,
0.01 <= amount < 10^12) to the clip names spoken after the channel prefix,
space separated. Amounts are parsed with decimal.Decimal and handled as integer
rupees/yuan plus integer minor units; floats are never used.

zh-CN: cn2an.an2cn(text, "low"), one clip per Chinese character, trailing zeros
of the decimal part dropped (and the 点 if nothing remains), then 元.

    Deliberate divergence from cn2an. cn2an applies the regex
    ([万亿])零([一..九][千]) -> \\1\\2, which also drops the 零 when the whole
    万 group is zero: 100001000 -> 一亿一千. Our grammar says one 零 for any
    run of zeros, also across 万/亿 groups, so we read 一亿零一千. The
    correction applied to cn2an's answer: when the 万 group (digits 5-8 from
    the right of the integer part) is 0000, the 亿 group is non-zero and the
    thousands digit of the lowest group is non-zero, insert 零 right after 亿.
    (1001000 -> 一百万一千 is unchanged: the 万 group is not all zeros.)

en-IN: num2words(n, lang="en_IN") words, commas dropped and hyphens turned
into spaces, in the sentence
    ["rupees"|"rupee" <words of R>] [["and"] <words of P> "paise"|"paisa"]
("rupee" when R == 1, "paisa" when P == 1, "and" only when R > 0).

    MAXVAL extension. num2words refuses values >= 10^10 (Num2Word_EN_IN.MAXVAL).
    We use a converter instance with MAXVAL = 10^12 and call to_cardinal(n)
    directly; the script asserts that this agrees with num2words(n,
    lang="en_IN") below 10^10, and that 12345 crore reads "twelve thousand
    three hundred and forty five crore".

hi-IN: the words of AI4Bharat's indic-numtowords (num2words(n, lang="hi")),
the published list of Hindi numerals (https://github.com/AI4Bharat/indic-numtowords,
MIT), in the sentence
    [<words of R> "रुपये"|"रुपया"] [["और"] <words of P> "पैसे"|"पैसा"]
("रुपया" when R == 1, "पैसा" when P == 1, "और" only when R > 0).

    अरब extension. indic-numtowords 1.1.0 reads up to 99,99,99,999 (it fails
    from 10^9 on). We read 10^9 as अरब, its multiplier (up to 999) and the
    rest with the library's own words: 1,23,45,67,890 -> एक अरब तेईस करोड़
    पैंतालीस लाख सड़सठ... as the library's words of 1 + अरब + its words of
    234567890. The script checks the library below 10^9 against hand rows.

The output is deterministic (the random amounts use a fixed seed).
"""

import random
import re
import sys
from decimal import Decimal
from importlib.metadata import version

import cn2an
from indic_numtowords import num2words as hi_num2words
from num2words import num2words
from num2words.lang_EN_IN import Num2Word_EN_IN

HARD_CASES = """
0.01 0.05 0.10 0.5 1.00 1.01 2 10 10.50 11 19 20 21 99 100 101 110 111 999
1000 1001 1010 1099 1100 9999 10000 10001 10010 10100 10999 11000 99999
100000 100001 100010 100050 100800 108000 110000 120000.50 999999 1000000
1000010 1000100 1001000 1234567 9999999 10000000 10000001 10010000 10000101
12345678.9 99999999.99 100000000 100000001 100010000 100001000 109000000
123456789.12 1000000000 9999999999 10000000000 123450000000 999999999999.99
""".split()

RANDOM_PER_GRAMMAR = 20
SEED_ZH = 20240601
SEED_EN = 20240602
SEED_HI = 20261202

MAX_AMOUNT = 10**12


def parse(text):
    """Amount text -> (integer part, minor units 0..99). Exact; rejects bad input."""
    assert re.fullmatch(r"[0-9]+(\.[0-9]{1,2})?", text), text
    d = Decimal(text)
    minor = int(d * 100)
    assert Decimal(minor) / 100 == d, text
    assert 1 <= minor < MAX_AMOUNT * 100, text
    return divmod(minor, 100)


# ---------------------------------------------------------------- zh-CN

ZH_CLIPS = set("零一二三四五六七八九十百千万亿点")


def zh_clips(text):
    whole, minor = parse(text)
    canonical = f"{whole}.{minor:02d}" if minor else str(whole)
    reading = cn2an.an2cn(canonical, "low")
    # The deliberate divergence: a zero 万 group between a non-zero 亿 group
    # and a non-zero thousands digit is read as 零.
    if (whole // 10**4) % 10**4 == 0 and whole // 10**8 != 0 and (whole // 1000) % 10 != 0:
        assert "亿" in reading and "亿零" not in reading, (text, reading)
        reading = reading.replace("亿", "亿零", 1)
    if "点" in reading:
        int_part, dec_part = reading.split("点")
        dec_part = dec_part.rstrip("零")
        reading = int_part + ("点" + dec_part if dec_part else "")
    assert set(reading) <= ZH_CLIPS, (text, reading)
    return " ".join(reading) + " 元"


def zh_independent(text):
    """Our zh-CN rule written from scratch (not via cn2an), to cross-check zh_clips.

    Digits with non-zero values are read digit+unit; a run of zeros followed by a
    non-zero digit is read as one 零, except when the run is only the trailing
    zeros of a non-zero group and the next digit is a thousands digit. 万/亿
    follow each non-zero group. A leading 一十 is read 十.
    """
    whole, minor = parse(text)
    units = ["", "十", "百", "千"]
    digits = "零一二三四五六七八九"
    out = []
    s = str(whole)
    n = len(s)
    pending_zero = False  # a zero run is open since the last non-zero digit
    run_len = 0
    for i, ch in enumerate(s):
        pos = n - 1 - i
        d = int(ch)
        if d == 0:
            if out:
                pending_zero = True
                run_len += 1
        else:
            if pending_zero:
                # pos % 4 == 3: the run ends at a group boundary, so it is
                # only trailing zeros of the previous group unless it covers
                # a whole group (run_len >= 4).
                trailing_only = pos % 4 == 3 and run_len < 4
                if not trailing_only:
                    out.append("零")
            out.append(digits[d] + units[pos % 4])
            pending_zero = False
            run_len = 0
        if pos % 4 == 0 and pos > 0:
            group = (whole // 10**pos) % 10**4
            if group:
                out.append("万" if pos == 4 else "亿")
    reading = "".join(out) or "零"
    if reading.startswith("一十"):
        reading = reading[1:]
    if minor:
        tenths, hundredths = divmod(minor, 10)
        dec = digits[tenths] + (digits[hundredths] if hundredths else "")
        reading += "点" + dec
    return " ".join(reading) + " 元"


# ---------------------------------------------------------------- en-IN

EN_IN = Num2Word_EN_IN()
EN_IN.MAXVAL = MAX_AMOUNT


def en_words(n):
    raw = EN_IN.to_cardinal(n)
    if n < 10**10:
        assert raw == num2words(n, lang="en_IN"), n
    words = raw.replace(",", " ").replace("-", " ").split()
    assert all(re.fullmatch(r"[a-z]+", w) for w in words), (n, raw)
    return " ".join(words)


def en_clips(text):
    whole, minor = parse(text)
    parts = []
    if whole:
        parts.append(("rupee" if whole == 1 else "rupees") + " " + en_words(whole))
    if minor:
        paise = en_words(minor) + (" paisa" if minor == 1 else " paise")
        parts.append(("and " if whole else "") + paise)
    return " ".join(parts)


# ---------------------------------------------------------------- hi-IN

ARAB = 10**9


def hi_words(n):
    if n >= ARAB:
        rest = n % ARAB
        return hi_words(n // ARAB) + " अरब" + (" " + hi_words(rest) if rest else "")
    return hi_num2words(n, lang="hi")


def hi_clips(text):
    whole, minor = parse(text)
    parts = []
    if whole:
        parts.append(hi_words(whole) + (" रुपया" if whole == 1 else " रुपये"))
    if minor:
        paise = hi_words(minor) + (" पैसा" if minor == 1 else " पैसे")
        parts.append(("और " if whole else "") + paise)
    return " ".join(parts)


# ---------------------------------------------------------------- amounts

def random_amounts(seed, count, exclude):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        int_digits = rng.randint(1, 12)
        decimals = rng.choice([0, 1, 2])
        whole = rng.randrange(10 ** (int_digits - 1) if int_digits > 1 else 0, 10**int_digits)
        text = str(whole)
        if decimals:
            text += "." + "".join(str(rng.randrange(10)) for _ in range(decimals))
        if Decimal(text) < Decimal("0.01") or text in exclude or text in out:
            continue
        out.append(text)
    return out


# ---------------------------------------------------------------- checks

def self_check():
    hand_zh = {
        "0.01": "零 点 零 一 元",
        "10": "十 元",
        "10.50": "十 点 五 元",
        "1.00": "一 元",
        "101": "一 百 零 一 元",
        "1001000": "一 百 万 一 千 元",
        "100001000": "一 亿 零 一 千 元",
        "100000001": "一 亿 零 一 元",
        "1000001000": "十 亿 零 一 千 元",
        "123456789.12": "一 亿 二 千 三 百 四 十 五 万 六 千 七 百 八 十 九 点 一 二 元",
    }
    hand_en = {
        "120000.50": "rupees one lakh twenty thousand and fifty paise",
        "1.00": "rupee one",
        "0.01": "one paisa",
        "0.05": "five paise",
        "1.01": "rupee one and one paisa",
        "101.50": "rupees one hundred and one and fifty paise",
        "123450000000": "rupees twelve thousand three hundred and forty five crore",
    }
    hand_hi = {
        "1.00": "एक रुपया",
        "0.01": "एक पैसा",
        "0.05": "पाँच पैसे",
        "1.01": "एक रुपया और एक पैसा",
        "99": "निन्यानवे रुपये",
        "100": "एक सौ रुपये",
        "101.50": "एक सौ एक रुपये और पचास पैसे",
        "1000": "एक हज़ार रुपये",
        "99999": "निन्यानवे हज़ार नौ सौ निन्यानवे रुपये",
        "100000": "एक लाख रुपये",
        "120000.50": "एक लाख बीस हज़ार रुपये और पचास पैसे",
        "10000000": "एक करोड़ रुपये",
        "123456789": "बारह करोड़ चौंतीस लाख छप्पन हज़ार सात सौ नवासी रुपये",
        "1000000000": "एक अरब रुपये",
        "999999999999.99": "नौ सौ निन्यानवे अरब निन्यानवे करोड़ निन्यानवे लाख निन्यानवे हज़ार नौ सौ निन्यानवे रुपये और निन्यानवे पैसे",
    }
    for hand, clips in [(hand_zh, zh_clips), (hand_en, en_clips), (hand_hi, hi_clips)]:
        for text, want in hand.items():
            assert clips(text) == want, (text, clips(text), want)
    # The MAXVAL extension agrees with plain num2words below its limit.
    for n in [1, 99, 100050, 9999999999, 10**9, 1234567891]:
        assert EN_IN.to_cardinal(n) == num2words(n, lang="en_IN"), n


# ---------------------------------------------------------------- output

def swift_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def table(name, doc, rows):
    lines = [f"    /// {doc}", f"    static let {name}: [(amount: String, clips: String)] = ["]
    lines += [f"        ({swift_string(a)}, {swift_string(c)})," for a, c in rows]
    lines.append("    ]")
    return lines


def main():
    self_check()
    assert len(HARD_CASES) == len(set(HARD_CASES))
    zh_amounts = HARD_CASES + random_amounts(SEED_ZH, RANDOM_PER_GRAMMAR, set(HARD_CASES))
    en_amounts = HARD_CASES + random_amounts(SEED_EN, RANDOM_PER_GRAMMAR, set(HARD_CASES))
    hi_amounts = HARD_CASES + random_amounts(SEED_HI, RANDOM_PER_GRAMMAR, set(HARD_CASES))
    zh_rows = [(a, zh_clips(a)) for a in zh_amounts]
    en_rows = [(a, en_clips(a)) for a in en_amounts]
    hi_rows = [(a, hi_clips(a)) for a in hi_amounts]
    for a, clips in zh_rows:
        assert clips == zh_independent(a), (a, clips, zh_independent(a))

    out = [
        f"// Generated by scripts/reference-tables.py from cn2an {version('cn2an')} (low), "
        f"num2words {version('num2words')} (en_IN) and indic-numtowords {version('indic-numtowords')} (hi). Do not edit.",
        "// Regenerate: pip install cn2an num2words indic-numtowords && "
        "python3 scripts/reference-tables.py > Tests/SoundboxTests/ReferenceTables.swift",
        "enum ReferenceTables {",
    ]
    out += table("zhCN", "amount text → zh-CN clips after the prefix", zh_rows)
    out += table("enIN", "amount text → en-IN clips after the prefix", en_rows)
    out += table("hiIN", "amount text → hi-IN clips after the prefix", hi_rows)
    out.append("}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
