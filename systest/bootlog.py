"""What the image's boot test reads off its logs, as functions with tests
(systest/unit/test_bootlog.py) rather than greps in shell: which payments
were spoken how often across power cuts, what a boot was doing when its
power went, which slot an install was writing.

A boot's logs (systest/image's harness, in the guest): receipts-N.log,
the backend's `mosquitto_sub -v` of the receipts topic ("TOPIC {json}"
lines); boot-N.txt, its markers (BOOTED with the slots, READY);
journal-N.log, soundboxd's log ("speaking id=X seq=N plays=P [summary=G]").

Python's standard library only.
"""
import re

STREAM_ID = r"[CS][0-9]+-[0-9]+"  # the payments a streaming boot sends: C<boot>-<n>, S<boot>-<n>
SPEAKING = re.compile(rf"speaking id=({STREAM_ID}) seq=[0-9]+ plays=([0-9]+)(?: summary=([0-9]+))?")
QUEUED = re.compile(rf'\{{"id":"({STREAM_ID})","status":"queued"')
UPDATE = re.compile(r'"kind":"update","status":"([a-z ]*)"(?:,"progress":([0-9]*))?')


def exactly_once(boots):
    """BOOTS: (receipts, journal) texts of the streaming boots, in order,
    the first one before any cut. Every payment whose "queued" receipt the
    backend saw must be started; a payment may be started twice only when
    the power was cut while it was speaking: then it is the first one
    spoken after that cut (each before it had its final state flushed
    before it started), or one of the offline summary spoken first after
    that cut (each logged "summary=G"). A start's line just before a cut
    may not have left the guest; P ("plays="), when the start was flushed
    before the cut, still counts it. The `playing` mark is not flushed
    (docs/soundboxd.md, "Flushes"), so P may say 1 again.

    Returns (ok, a one-line account)."""
    queued, starts, allowed = set(), {}, set()
    for k, (receipts, journal) in enumerate(boots):
        queued.update(QUEUED.findall(receipts))
        seen = SPEAKING.findall(journal)
        for pid, plays, _ in seen:
            starts[pid] = max(starts.get(pid, 0) + 1, int(plays))
        if k > 0 and seen:
            group = seen[0][2]
            allowed.update([pid for pid, _, g in seen if g and g == group] or [seen[0][0]])
    never = sorted(queued - set(starts))
    again = sorted(pid for pid, n in starts.items() if n > 1)
    wrong = [pid for pid in again if starts[pid] > 2 or pid not in allowed]
    account = (f"exactly once: {len(queued)} payments queued before the cuts, {len(starts)} spoken, "
               f"{len(again)} spoken again after a cut while speaking ({', '.join(again) or 'none'}); "
               f"never spoken: {', '.join(never) or 'none'}; spoken more than allowed: {', '.join(wrong) or 'none'}")
    return (bool(queued) and not never and not wrong), account


def spoken(journals, receipts, pid):
    """How often soundboxd started PID (its "speaking id=PID " lines over
    all JOURNALS) and how many "played" receipts the backend got for it."""
    return (sum(j.count(f"speaking id={pid} ") for j in journals),
            sum(r.count(f'{{"id":"{pid}","status":"played"') for r in receipts))


def last_update(receipts):
    """The boot's last update receipt: (status, progress or None), or None."""
    found = UPDATE.findall(receipts)
    if not found:
        return None
    status, progress = found[-1]
    return status, (int(progress) if progress else None)


def hit(receipts):
    """What a boot was doing when its power went, in words."""
    booted = "booted on trial" if re.search(r"^BOOTED .*tried=yes", receipts, re.M) else "booted the default"
    up = "soundboxd up" if re.search(r"^READY", receipts, re.M) else "before soundboxd"
    last = last_update(receipts)
    said = "none" if last is None else last[0] + (f" {last[1]}" if last[1] is not None else "")
    return f"{booted}, {up}, last update receipt: {said}"


def writing_slot(receipts):
    """The slot ("A" or "B") an install was writing when the boot lost
    its power (an "installing" receipt its last update receipt): the other
    one than the boot ran. None when no install was under way."""
    last = last_update(receipts)
    if last is None or last[0] != "installing":
        return None
    m = re.search(r"^BOOTED .*current=([AB])", receipts, re.M)
    return {"A": "B", "B": "A"}[m.group(1)] if m else None


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
