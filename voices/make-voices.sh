#!/usr/bin/env bash
# Regenerates the synthetic voice packs voices/zh-CN/, voices/en-IN/,
# voices/hi-IN/ and the eleven other Indian ones (every mp3 plus
# manifest.json): espeak-ng speaks each clip (the "recordings", one WAV per
# clip named by the clip), and
# `soundboxctl voice build` makes the pack from them as it would from a
# voice actor's (trimmed, one loudness under a true-peak ceiling, gapless
# mp3s; voices/README.md). Deterministic: rerunning produces byte-identical
# files.
#
#   voices/make-voices.sh [PACK...]     (after `swift build`; SOUNDBOXCTL names another soundboxctl,
#                                        SOUNDBOX_VOICES_OUT another folder for the packs: the tests
#                                        rebuild one and compare it with the shipped one)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ctl="${SOUNDBOXCTL:-$here/../.build/debug/soundboxctl}"
out="${SOUNDBOX_VOICES_OUT:-$here}"
missing=()
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
# (read once: `ldconfig -p | grep -q` fails at random under pipefail, when grep
# stops reading before ldconfig has written everything)
libs=$(ldconfig -p)
for lib in libsndfile.so.1 libsoxr.so.0 libebur128.so.1 libmp3lame.so.0; do
  grep -q "$lib" <<<"$libs" || missing+=("$lib")
done
if ((${#missing[@]})); then
  echo "make-voices.sh: missing ${missing[*]}; install with:" >&2
  echo "  apt-get install -y espeak-ng libsndfile1 libsoxr0 libebur128-1 libmp3lame0" >&2
  exit 1
fi
[ -x "$ctl" ] || { echo "make-voices.sh: no $ctl: run swift build first (or set SOUNDBOXCTL)" >&2; exit 1; }

espeak_version="$(espeak-ng --version | awk '{print $4}')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Clip tables: clip name (manifest key, the contract with the grammar) | text to speak (the
# builder names each file after its clip).
ZH_CN='
零|ling2
一|yi1
二|er4
三|san1
四|si4
五|wu3
六|liu4
七|qi1
八|ba1
九|jiu3
十|shi2
百|bai3
千|qian1
万|wan4
亿|yi4
点|dian3
元|yuan2
支付宝到账|zhi1 fu4 bao3 dao4 zhang4
微信收款|wei1 xin4 shou1 kuan3
收款到账|shou1 kuan3 dao4 zhang4
音量最大|yin1 liang4 zui4 da4
音量最小|yin1 liang4 zui4 xiao3
网络已连接|wang3 luo4 yi3 lian2 jie1
网络已断开|wang3 luo4 yi3 duan4 kai1
今日收款|jin1 ri4 shou1 kuan3
离线期间收款|li2 xian4 qi1 jian1 shou1 kuan3
笔|bi3
共|gong4
测试|ce4 shi4
'

# Phonetic spellings where en-us espeak-ng gets the Indian word wrong ("paise" -> "pays").
EN_IN='
zero|zero
one|one
two|two
three|three
four|four
five|five
six|six
seven|seven
eight|eight
nine|nine
ten|ten
eleven|eleven
twelve|twelve
thirteen|thirteen
fourteen|fourteen
fifteen|fifteen
sixteen|sixteen
seventeen|seventeen
eighteen|eighteen
nineteen|nineteen
twenty|twenty
thirty|thirty
forty|forty
fifty|fifty
sixty|sixty
seventy|seventy
eighty|eighty
ninety|ninety
hundred|hundred
thousand|thousand
lakh|lakh
crore|crore
and|and
rupee|rupee
rupees|rupees
paisa|paisa
paise|pie say
received|received
alipay_received|Alipay received
wechat_received|WeChat pay received
volume_max|maximum volume
volume_min|minimum volume
network_connected|network connected
network_disconnected|network disconnected
today_total|today'"'"'s collection
while_offline|while offline
payments|payments
total|total
test|test
'

# Hindi: espeak-ng reads the Devanagari itself; the numbers' files by value.
HI_IN='
शून्य|शून्य
एक|एक
दो|दो
तीन|तीन
चार|चार
पाँच|पाँच
छः|छः
सात|सात
आठ|आठ
नौ|नौ
दस|दस
ग्यारह|ग्यारह
बारह|बारह
तेरह|तेरह
चौदह|चौदह
पंद्रह|पंद्रह
सोलह|सोलह
सत्रह|सत्रह
अट्ठारह|अट्ठारह
उन्नीस|उन्नीस
बीस|बीस
इक्कीस|इक्कीस
बाईस|बाईस
तेईस|तेईस
चौबीस|चौबीस
पच्चीस|पच्चीस
छब्बीस|छब्बीस
सत्ताईस|सत्ताईस
अट्ठाईस|अट्ठाईस
उनतीस|उनतीस
तीस|तीस
इकतीस|इकतीस
बत्तीस|बत्तीस
तैंतीस|तैंतीस
चौंतीस|चौंतीस
पैंतीस|पैंतीस
छत्तीस|छत्तीस
सैंतीस|सैंतीस
अड़तीस|अड़तीस
उनतालीस|उनतालीस
चालीस|चालीस
इकतालीस|इकतालीस
बयालीस|बयालीस
तैंतालीस|तैंतालीस
चौंतालीस|चौंतालीस
पैंतालीस|पैंतालीस
छियालीस|छियालीस
सैंतालीस|सैंतालीस
अड़तालीस|अड़तालीस
उनचास|उनचास
पचास|पचास
इक्यावन|इक्यावन
बावन|बावन
तिरेपन|तिरेपन
चौवन|चौवन
पचपन|पचपन
छप्पन|छप्पन
सत्तावन|सत्तावन
अट्ठावन|अट्ठावन
उनसठ|उनसठ
साठ|साठ
इकसठ|इकसठ
बासठ|बासठ
तिरेसठ|तिरेसठ
चौंसठ|चौंसठ
पैंसठ|पैंसठ
छयासठ|छयासठ
सरसठ|सरसठ
अड़सठ|अड़सठ
उनहत्तर|उनहत्तर
सत्तर|सत्तर
इकहत्तर|इकहत्तर
बहत्तर|बहत्तर
तिहत्तर|तिहत्तर
चौहत्तर|चौहत्तर
पचहत्तर|पचहत्तर
छिहत्तर|छिहत्तर
सतहत्तर|सतहत्तर
अठहत्तर|अठहत्तर
उन्यासी|उन्यासी
अस्सी|अस्सी
इक्यासी|इक्यासी
बयासी|बयासी
तिरासी|तिरासी
चौरासी|चौरासी
पचासी|पचासी
छियासी|छियासी
सत्तासी|सत्तासी
अठासी|अठासी
नवासी|नवासी
नब्बे|नब्बे
इक्यानवे|इक्यानवे
बानवे|बानवे
तिरानवे|तिरानवे
चौरानवे|चौरानवे
पचानवे|पचानवे
छियानवे|छियानवे
सत्तानवे|सत्तानवे
अट्ठानवे|अट्ठानवे
निन्यानवे|निन्यानवे
सौ|सौ
हज़ार|हज़ार
लाख|लाख
करोड़|करोड़
अरब|अरब
रुपया|रुपया
रुपये|रुपये
पैसा|पैसा
पैसे|पैसे
और|और
भुगतान_प्राप्त|भुगतान प्राप्त
आवाज़_सबसे_तेज़|आवाज़ सबसे तेज़
आवाज़_सबसे_धीमी|आवाज़ सबसे धीमी
नेटवर्क_जुड़_गया|नेटवर्क जुड़ गया
नेटवर्क_कट_गया|नेटवर्क कट गया
परीक्षण|परीक्षण
आज|आज
ऑफ़लाइन_रहते_हुए|ऑफ़लाइन रहते हुए
भुगतान|भुगतान
कुल|कुल
'

# make_pack <pack name> <espeak-ng voice> <table>
make_pack() {
  local name="$1" voice="$2" table="$3" recordings="$work/$1"
  mkdir -p "$recordings"
  while IFS='|' read -r clip text; do
    [[ -n "$clip" ]] || continue
    espeak-ng -v "$voice" -s 150 -w "$recordings/$clip.wav" "$text"
  done <<<"$table"
  rm -rf "${out:?}/$name"
  "$ctl" voice build "$recordings" "$out/$name" --lang "$name" \
    --source "voices/make-voices.sh: espeak-ng $espeak_version -v $voice -s 150" | tail -1
}

# The eleven Indic packs: every clip their grammar asks for (`soundboxctl
# voice clips`), spoken by espeak-ng's voice for the language from the text
# indic-synth.py gives it (a word piece as its sound, a letter the voice
# lacks as one it has).
indic=(as-IN bn-IN gu-IN kn-IN ml-IN mr-IN or-IN pa-IN ta-IN te-IN ur-IN)
indic_table() { "$ctl" voice clips --lang "$1" | python3 "$here/indic-synth.py" "$1"; }

# make-voices.sh [PACK...]: all fourteen by default.
packs=("$@")
((${#packs[@]})) || packs=(zh-CN en-IN hi-IN "${indic[@]}")
for pack in "${packs[@]}"; do
  case "$pack" in
    zh-CN) make_pack zh-CN cmn-latn-pinyin "$ZH_CN" ;;
    en-IN) make_pack en-IN en-us "$EN_IN" ;;
    hi-IN) make_pack hi-IN hi "$HI_IN" ;;
    as-IN|bn-IN|gu-IN|kn-IN|ml-IN|mr-IN|or-IN|pa-IN|ta-IN|te-IN|ur-IN)
      make_pack "$pack" "${pack%-IN}" "$(indic_table "$pack")" ;;
    *) echo "make-voices.sh: no pack '$pack' (zh-CN, en-IN, hi-IN, ${indic[*]})" >&2; exit 2 ;;
  esac
done
