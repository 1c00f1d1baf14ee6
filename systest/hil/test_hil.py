"""The board's switch, buttons, LED and speaker, with the real soundboxd
on a gpio-sim chip and an snd-aloop card (conftest.py). Each test starts
from an unmuted box and can be run alone (`pytest -k long_press`)."""
import math
import time

from conftest import LED, MUTE, UP
from lab import peak, rms, seconds, until

AUDIBLE = 0.002  # RMS; snd-aloop's silence is exactly 0


def press(box, line, hold):
    """A finger on a button for HOLD seconds (the one thing faked here)."""
    box.pull(line, "pull-down")
    time.sleep(hold)
    box.pull(line, "pull-up")


def test_led_steady(unmuted_box):
    """Unmuted, MQTT off (which counts as connected), no fault: the LED is on, steadily."""
    box = unmuted_box
    samples = ""
    for _ in range(8):  # sampled over 2 s: a blink would show
        samples += box.value(LED)
        time.sleep(0.25)
    assert samples == "1" * 8, f"LED samples {samples} over 2 s (status: {box.ctl('status')})"
    assert box.log.lines("api=v"), "soundboxd did not log its libgpiod API"


def test_mute_switch(unmuted_box):
    """The switch on: the payment is kept as muted, nothing is heard, the LED is off."""
    box = unmuted_box
    before = box.log.count("mute_switch on=true")
    box.pull(MUTE, "pull-down")
    box.log.await_more("mute_switch on=true", before, 10)
    try:
        with box.capture("muted") as cap:
            box.say("1.00", "HIL-MUTED")
            box.drained()
        assert box.state_of("HIL-MUTED") == "muted"
        assert peak(cap.path) == 0, f"heard while muted: peak {peak(cap.path)} over {seconds(cap.path):.1f} s"
        assert box.value(LED) == "0"
    finally:
        box.unmuted()


def test_volume_up_press(unmuted_box):
    """A short press of vol_up raises the volume by one step, and the next payment is louder."""
    box = unmuted_box
    box.ctl("volume 2")
    with box.capture("vol2") as quiet:
        box.say("2.00", "HIL-VOL2")
        box.drained()
    ups = box.log.count("action=volumeUp")
    press(box, UP, 0.2)
    box.log.await_more("action=volumeUp", ups, 10)
    assert box.volume() == "3"
    with box.capture("vol3") as loud:
        box.say("2.00", "HIL-VOL3")
        box.drained()
    r2, r3 = rms(quiet.path), rms(loud.path)
    assert (box.state_of("HIL-VOL2"), box.state_of("HIL-VOL3")) == ("played", "played")
    assert r2 > AUDIBLE, f"the volume-2 announcement is not audible (RMS {r2})"
    assert r3 > r2, f"volume 3 (RMS {r3}) is not louder than volume 2 (RMS {r2})"
    print(f"volume 2 RMS {r2:.6f} -> volume 3 RMS {r3:.6f}: {20 * math.log10(r3 / r2):.1f} dB")


def test_long_press_replay(unmuted_box):
    """Holding vol_up for 2.5 s replays the last payment, audibly, without a volume step."""
    box = unmuted_box
    box.say("3.00", "HIL-LAST")
    box.drained()
    volume = box.volume()
    replays, ups = box.log.count("replaying"), box.log.count("action=volumeUp")
    with box.capture("replay") as cap:
        press(box, UP, 2.5)
        box.log.await_more("replaying", replays, 15)
        box.drained()
    assert "id=HIL-LAST" in box.log.lines("replaying")[-1]
    assert rms(cap.path) > AUDIBLE, f"the replay is not audible (RMS {rms(cap.path)})"
    assert box.volume() == volume, "the long press changed the volume"
    assert box.log.count("action=volumeUp") == ups, "the long press also counted as a short press"


def test_underrun_recovery(unmuted_box):
    """The daemon frozen for 0.8 s mid-announcement (as a busy board might
    stall it): the real-time card runs dry, ALSA recovers, and the payment
    finishes audibly as played."""
    box = unmuted_box
    with box.capture("xrun") as cap:
        box.say("88888888.88", "HIL-XRUN")
        until("HIL-XRUN spoken", lambda: box.log.lines("speaking id=HIL-XRUN"), 20)
        # 1.5 s into a ~10 s announcement, then the stall: both timed on the board.
        box.board.check(f"sleep 1.5; kill -STOP {box.pid}; sleep 0.8; kill -CONT {box.pid}")
        box.drained()
    assert box.state_of("HIL-XRUN") == "played"
    assert not box.log.lines("audio_failed"), box.log.lines("audio_failed")[-1:]
    assert box.log.lines("audio_recovered"), "no underrun was recovered: the stall did not reach ALSA"
    assert rms(cap.path) > AUDIBLE, f"not audible after the stall (RMS {rms(cap.path)})"


def test_led_follows_at_once(unmuted_box):
    """A mute set elsewhere (here through the socket, as a remote config
    would) reaches the LED within a second: an event, not a timer."""
    box = unmuted_box
    box.ctl("config set audio.mute true")
    try:
        until("the LED off after audio.mute true", lambda: box.value(LED) == "0", 1, interval=0.05)
    finally:
        box.ctl("config set audio.mute false")
    until("the LED on after audio.mute false", lambda: box.value(LED) == "1", 1, interval=0.05)


def test_idle_no_wakeups(unmuted_box):
    """Idle with the LED steady, no thread of the daemon runs (6 s counted on the board)."""
    box = unmuted_box
    box.drained()
    switches = f"cat /proc/{box.pid}/task/*/status | awk '/ctxt_switches/ {{n += $2}} END {{print n}}'"
    counts = box.board.check(f"sleep 1; {switches}; sleep 6; {switches}").split()
    assert counts[0] == counts[1], f"{int(counts[1]) - int(counts[0])} context switches over 6 s idle"
    assert box.value(LED) == "1"
