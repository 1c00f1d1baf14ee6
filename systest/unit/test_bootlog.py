"""systest/bootlog.py over made-up logs: the exactly-once rule across
power cuts, what a cut hit, the slot an install was writing."""
from bootlog import exactly_once, hit, last_update, spoken, writing_slot

T = "soundbox/shop/counter-7/receipt"


def queued(*ids):
    return "".join(f'{T} {{"id":"{i}","status":"queued","amount":"1.00"}}\n' for i in ids)


def speaking(*starts):
    """starts: (id, seq, plays[, summary])."""
    return "".join(f"<6>queue: speaking id={s[0]} seq={s[1]} plays={s[2]}"
                   + (f" summary={s[3]}" if len(s) > 3 else "") + "\n" for s in starts)


def test_each_spoken_once_is_exactly_once():
    ok, account = exactly_once([(queued("S5-1", "S5-2"), speaking(("S5-1", 1, 1), ("S5-2", 2, 1)))])
    assert ok, account
    assert "2 payments queued before the cuts, 2 spoken" in account


def test_a_queued_payment_never_spoken_fails():
    ok, account = exactly_once([(queued("S5-1", "S5-2"), speaking(("S5-1", 1, 1))),
                                ("", speaking())])
    assert not ok and "never spoken: S5-2" in account


def test_the_first_after_a_cut_may_be_spoken_again():
    # S5-2 was speaking when the power went: the next boot starts with it.
    ok, account = exactly_once([(queued("S5-1", "S5-2"), speaking(("S5-1", 1, 1), ("S5-2", 2, 1))),
                                ("", speaking(("S5-2", 2, 1)))])
    assert ok, account
    assert "spoken again after a cut while speaking (S5-2)" in account


def test_spoken_again_when_not_first_after_the_cut_fails():
    ok, account = exactly_once([(queued("S5-1", "S5-2"), speaking(("S5-1", 1, 1), ("S5-2", 2, 1))),
                                ("", speaking(("S5-2", 2, 1), ("S5-1", 1, 2)))])
    assert not ok and "spoken more than allowed: S5-1" in account


def test_a_lost_log_line_still_counts_by_plays():
    # The start's line never left the guest, but the next start says plays=3.
    ok, account = exactly_once([(queued("S5-1"), ""), ("", speaking(("S5-1", 1, 3)))])
    assert not ok and "spoken more than allowed: S5-1" in account


def test_the_offline_summary_first_after_a_cut_may_be_spoken_again():
    first = (queued("C6-1", "C6-2", "C6-3"), speaking(("C6-1", 1, 1, 4), ("C6-2", 2, 1, 4)))
    again = ("", speaking(("C6-1", 1, 1, 7), ("C6-2", 2, 1, 7), ("C6-3", 3, 1)))
    ok, account = exactly_once([first, again])
    assert ok, account


def test_nothing_queued_proves_nothing():
    ok, _ = exactly_once([("", speaking(("S5-1", 1, 1)))])
    assert not ok


def test_spoken_counts_starts_and_played_receipts():
    journals = [speaking(("U2-before", 1, 1)), speaking(("U2-before1", 2, 1))]
    receipts = [f'{T} {{"id":"U2-before","status":"played"}}\n' * 2]
    assert spoken(journals, receipts, "U2-before") == (1, 2)


def test_what_a_cut_hit():
    r = ("BOOTED boot=3 default=A current=B try=B tried=yes bad=\nREADY boot=3\n"
         f'{T} {{"id":"UPD-3","kind":"update","status":"downloading","progress":40}}\n'
         f'{T} {{"id":"UPD-3","kind":"update","status":"installing","progress":55}}\n')
    assert last_update(r) == ("installing", 55)
    assert hit(r) == "booted on trial, soundboxd up, last update receipt: installing 55"
    assert hit("BOOTED boot=4 default=A current=A tried=no\n") == "booted the default, before soundboxd, last update receipt: none"


def test_the_slot_an_install_was_writing():
    booted_a = "BOOTED boot=3 default=A current=A try= tried=no bad=\n"
    installing = f'{T} {{"id":"UPD-3","kind":"update","status":"installing","progress":10}}\n'
    assert writing_slot(booted_a + installing) == "B"
    assert writing_slot(booted_a.replace("current=A", "current=B") + installing) == "A"
    # Over (a later receipt), or never begun: no slot was being written.
    assert writing_slot(booted_a + installing + f'{T} {{"id":"UPD-3","kind":"update","status":"waiting to reboot"}}\n') is None
    assert writing_slot(booted_a) is None
