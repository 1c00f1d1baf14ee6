#!/usr/bin/env bash
# Regenerates the synthetic voice packs voices/zh-CN/, voices/en-IN/ and
# voices/hi-IN/ (every mp3 plus manifest.json) with espeak-ng + lame. Deterministic:
# rerunning produces byte-identical files. See voices/README.md.
set -euo pipefail

missing=()
for tool in espeak-ng lame python3; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "make-voices.sh: missing ${missing[*]}; install with:" >&2
  echo "  apt-get install -y espeak-ng lame python3" >&2
  exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
espeak_version="$(espeak-ng --version | awk '{print $4}')"
lame_version="$(lame --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Clip tables: clip name (manifest key, the contract with the grammar) | text to speak | file.
ZH_CN='
零|ling2|ling2.mp3
一|yi1|yi1.mp3
二|er4|er4.mp3
三|san1|san1.mp3
四|si4|si4.mp3
五|wu3|wu3.mp3
六|liu4|liu4.mp3
七|qi1|qi1.mp3
八|ba1|ba1.mp3
九|jiu3|jiu3.mp3
十|shi2|shi2.mp3
百|bai3|bai3.mp3
千|qian1|qian1.mp3
万|wan4|wan4.mp3
亿|yi4|yi4.mp3
点|dian3|dian3.mp3
元|yuan2|yuan2.mp3
支付宝到账|zhi1 fu4 bao3 dao4 zhang4|zhifubao_daozhang.mp3
微信收款|wei1 xin4 shou1 kuan3|weixin_shoukuan.mp3
收款到账|shou1 kuan3 dao4 zhang4|shoukuan_daozhang.mp3
音量最大|yin1 liang4 zui4 da4|yinliang_zuida.mp3
音量最小|yin1 liang4 zui4 xiao3|yinliang_zuixiao.mp3
网络已连接|wang3 luo4 yi3 lian2 jie1|wangluo_yilianjie.mp3
网络已断开|wang3 luo4 yi3 duan4 kai1|wangluo_yiduankai.mp3
今日收款|jin1 ri4 shou1 kuan3|jinri_shoukuan.mp3
离线期间收款|li2 xian4 qi1 jian1 shou1 kuan3|lixian_qijian_shoukuan.mp3
笔|bi3|bi3.mp3
共|gong4|gong4.mp3
测试|ce4 shi4|ceshi.mp3
'

# Phonetic spellings where en-us espeak-ng gets the Indian word wrong ("paise" -> "pays").
EN_IN='
zero|zero|zero.mp3
one|one|one.mp3
two|two|two.mp3
three|three|three.mp3
four|four|four.mp3
five|five|five.mp3
six|six|six.mp3
seven|seven|seven.mp3
eight|eight|eight.mp3
nine|nine|nine.mp3
ten|ten|ten.mp3
eleven|eleven|eleven.mp3
twelve|twelve|twelve.mp3
thirteen|thirteen|thirteen.mp3
fourteen|fourteen|fourteen.mp3
fifteen|fifteen|fifteen.mp3
sixteen|sixteen|sixteen.mp3
seventeen|seventeen|seventeen.mp3
eighteen|eighteen|eighteen.mp3
nineteen|nineteen|nineteen.mp3
twenty|twenty|twenty.mp3
thirty|thirty|thirty.mp3
forty|forty|forty.mp3
fifty|fifty|fifty.mp3
sixty|sixty|sixty.mp3
seventy|seventy|seventy.mp3
eighty|eighty|eighty.mp3
ninety|ninety|ninety.mp3
hundred|hundred|hundred.mp3
thousand|thousand|thousand.mp3
lakh|lakh|lakh.mp3
crore|crore|crore.mp3
and|and|and.mp3
rupee|rupee|rupee.mp3
rupees|rupees|rupees.mp3
paisa|paisa|paisa.mp3
paise|pie say|paise.mp3
received|received|received.mp3
alipay_received|Alipay received|alipay_received.mp3
wechat_received|WeChat pay received|wechat_received.mp3
volume_max|maximum volume|volume_max.mp3
volume_min|minimum volume|volume_min.mp3
network_connected|network connected|network_connected.mp3
network_disconnected|network disconnected|network_disconnected.mp3
today_total|today'"'"'s collection|today_total.mp3
while_offline|while offline|while_offline.mp3
payments|payments|payments.mp3
total|total|total.mp3
test|test|test.mp3
'

# Hindi: espeak-ng reads the Devanagari itself; the numbers' files by value.
HI_IN='
शून्य|शून्य|n00.mp3
एक|एक|n01.mp3
दो|दो|n02.mp3
तीन|तीन|n03.mp3
चार|चार|n04.mp3
पाँच|पाँच|n05.mp3
छः|छः|n06.mp3
सात|सात|n07.mp3
आठ|आठ|n08.mp3
नौ|नौ|n09.mp3
दस|दस|n10.mp3
ग्यारह|ग्यारह|n11.mp3
बारह|बारह|n12.mp3
तेरह|तेरह|n13.mp3
चौदह|चौदह|n14.mp3
पंद्रह|पंद्रह|n15.mp3
सोलह|सोलह|n16.mp3
सत्रह|सत्रह|n17.mp3
अट्ठारह|अट्ठारह|n18.mp3
उन्नीस|उन्नीस|n19.mp3
बीस|बीस|n20.mp3
इक्कीस|इक्कीस|n21.mp3
बाईस|बाईस|n22.mp3
तेईस|तेईस|n23.mp3
चौबीस|चौबीस|n24.mp3
पच्चीस|पच्चीस|n25.mp3
छब्बीस|छब्बीस|n26.mp3
सत्ताईस|सत्ताईस|n27.mp3
अट्ठाईस|अट्ठाईस|n28.mp3
उनतीस|उनतीस|n29.mp3
तीस|तीस|n30.mp3
इकतीस|इकतीस|n31.mp3
बत्तीस|बत्तीस|n32.mp3
तैंतीस|तैंतीस|n33.mp3
चौंतीस|चौंतीस|n34.mp3
पैंतीस|पैंतीस|n35.mp3
छत्तीस|छत्तीस|n36.mp3
सैंतीस|सैंतीस|n37.mp3
अड़तीस|अड़तीस|n38.mp3
उनतालीस|उनतालीस|n39.mp3
चालीस|चालीस|n40.mp3
इकतालीस|इकतालीस|n41.mp3
बयालीस|बयालीस|n42.mp3
तैंतालीस|तैंतालीस|n43.mp3
चौंतालीस|चौंतालीस|n44.mp3
पैंतालीस|पैंतालीस|n45.mp3
छियालीस|छियालीस|n46.mp3
सैंतालीस|सैंतालीस|n47.mp3
अड़तालीस|अड़तालीस|n48.mp3
उनचास|उनचास|n49.mp3
पचास|पचास|n50.mp3
इक्यावन|इक्यावन|n51.mp3
बावन|बावन|n52.mp3
तिरेपन|तिरेपन|n53.mp3
चौवन|चौवन|n54.mp3
पचपन|पचपन|n55.mp3
छप्पन|छप्पन|n56.mp3
सत्तावन|सत्तावन|n57.mp3
अट्ठावन|अट्ठावन|n58.mp3
उनसठ|उनसठ|n59.mp3
साठ|साठ|n60.mp3
इकसठ|इकसठ|n61.mp3
बासठ|बासठ|n62.mp3
तिरेसठ|तिरेसठ|n63.mp3
चौंसठ|चौंसठ|n64.mp3
पैंसठ|पैंसठ|n65.mp3
छयासठ|छयासठ|n66.mp3
सरसठ|सरसठ|n67.mp3
अड़सठ|अड़सठ|n68.mp3
उनहत्तर|उनहत्तर|n69.mp3
सत्तर|सत्तर|n70.mp3
इकहत्तर|इकहत्तर|n71.mp3
बहत्तर|बहत्तर|n72.mp3
तिहत्तर|तिहत्तर|n73.mp3
चौहत्तर|चौहत्तर|n74.mp3
पचहत्तर|पचहत्तर|n75.mp3
छिहत्तर|छिहत्तर|n76.mp3
सतहत्तर|सतहत्तर|n77.mp3
अठहत्तर|अठहत्तर|n78.mp3
उन्यासी|उन्यासी|n79.mp3
अस्सी|अस्सी|n80.mp3
इक्यासी|इक्यासी|n81.mp3
बयासी|बयासी|n82.mp3
तिरासी|तिरासी|n83.mp3
चौरासी|चौरासी|n84.mp3
पचासी|पचासी|n85.mp3
छियासी|छियासी|n86.mp3
सत्तासी|सत्तासी|n87.mp3
अठासी|अठासी|n88.mp3
नवासी|नवासी|n89.mp3
नब्बे|नब्बे|n90.mp3
इक्यानवे|इक्यानवे|n91.mp3
बानवे|बानवे|n92.mp3
तिरानवे|तिरानवे|n93.mp3
चौरानवे|चौरानवे|n94.mp3
पचानवे|पचानवे|n95.mp3
छियानवे|छियानवे|n96.mp3
सत्तानवे|सत्तानवे|n97.mp3
अट्ठानवे|अट्ठानवे|n98.mp3
निन्यानवे|निन्यानवे|n99.mp3
सौ|सौ|sau.mp3
हज़ार|हज़ार|hazaar.mp3
लाख|लाख|lakh.mp3
करोड़|करोड़|crore.mp3
अरब|अरब|arab.mp3
रुपया|रुपया|rupaya.mp3
रुपये|रुपये|rupaye.mp3
पैसा|पैसा|paisa.mp3
पैसे|पैसे|paise.mp3
और|और|aur.mp3
भुगतान_प्राप्त|भुगतान प्राप्त|bhugtan_prapt.mp3
आवाज़_सबसे_तेज़|आवाज़ सबसे तेज़|awaaz_sabse_tez.mp3
आवाज़_सबसे_धीमी|आवाज़ सबसे धीमी|awaaz_sabse_dheemi.mp3
नेटवर्क_जुड़_गया|नेटवर्क जुड़ गया|network_jud_gaya.mp3
नेटवर्क_कट_गया|नेटवर्क कट गया|network_kat_gaya.mp3
परीक्षण|परीक्षण|parikshan.mp3
आज|आज|aaj.mp3
ऑफ़लाइन_रहते_हुए|ऑफ़लाइन रहते हुए|offline_rehte_hue.mp3
भुगतान|भुगतान|bhugtan.mp3
कुल|कुल|kul.mp3
'

# Strips espeak-ng's leading/trailing digital silence (about 0.4 s of exact zeros at
# the end) so the player's gap_ms alone sets the spacing; then sanity-checks the clip.
TRIM_PY='
import array, sys, wave
path = sys.argv[1]
with wave.open(path, "rb") as w:
    params, pcm = w.getparams(), array.array("h", w.readframes(w.getnframes()))
nz = [i for i, v in enumerate(pcm) if v]
if not nz: sys.exit(f"{path}: silent clip")
pcm = pcm[nz[0]:nz[-1] + 1]
secs = len(pcm) / params.framerate
rms = (sum(v * v for v in pcm) / len(pcm)) ** 0.5 / 32768
if secs >= 3 or rms < 0.01: sys.exit(f"{path}: bad clip ({secs:.2f} s, rms {rms:.3f})")
with wave.open(path, "wb") as w:
    w.setparams(params); w.writeframes(pcm.tobytes())
'

MANIFEST_PY='
import json, sys
name, currency, source = sys.argv[1:4]
clips = {}
for line in sys.stdin.buffer.read().decode("utf-8").splitlines():
    if line.strip():
        clip, _text, file = line.split("|")
        clips[clip] = file
manifest = {
    "format_version": 1,
    "name": name,
    "language": name,
    "grammar": name,
    "currency": currency,
    "fallback": None,
    "format": {"codec": "mp3", "sample_rate": 22050, "channels": 1},
    "gap_ms": 40,
    "source": source,
    "clips": clips,
}
with open(sys.argv[4], "w", encoding="utf-8") as f:
    json.dump(manifest, f, ensure_ascii=False, indent=2, sort_keys=False)
    f.write("\n")
'

# make_pack <pack name> <currency> <espeak-ng voice> <table>
make_pack() {
  local name="$1" currency="$2" voice="$3" table="$4" dir="$here/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  while IFS='|' read -r clip text file; do
    [[ -n "$clip" ]] || continue
    espeak-ng -v "$voice" -s 150 -w "$work/clip.wav" "$text"
    python3 -c "$TRIM_PY" "$work/clip.wav"
    # VBR so lame writes the Xing/LAME tag (encoder delay/padding for gapless decode);
    # 22050 Hz mono stays MPEG-2 layer III; no ID3 tags are written.
    lame --quiet --nohist -V 4 -m m --resample 22.05 "$work/clip.wav" "$dir/$file"
  done <<<"$table"
  python3 -c "$MANIFEST_PY" "$name" "$currency" \
    "voices/make-voices.sh: espeak-ng $espeak_version -v $voice -s 150, lame $lame_version -V 4" \
    "$dir/manifest.json" <<<"$table"
  echo "$name: $(grep -c '|' <<<"$table") clips -> $dir"
}

# make-voices.sh [PACK...]: all three by default.
packs=("$@")
((${#packs[@]})) || packs=(zh-CN en-IN hi-IN)
for pack in "${packs[@]}"; do
  case "$pack" in
    zh-CN) make_pack zh-CN CNY cmn-latn-pinyin "$ZH_CN" ;;
    en-IN) make_pack en-IN INR en-us "$EN_IN" ;;
    hi-IN) make_pack hi-IN INR hi "$HI_IN" ;;
    *) echo "make-voices.sh: no pack '$pack' (zh-CN, en-IN, hi-IN)" >&2; exit 2 ;;
  esac
done
