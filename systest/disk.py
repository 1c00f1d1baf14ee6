"""A card after a power cut, checked as the next boot would find it: each
ext4 partition (the state and both root slots) copied out, its journal
replayed as a mount would, then `e2fsck -fn`; the payment queue's
database (soundbox.db and its WAL, read with debugfs) through SQLite's
`PRAGMA integrity_check`. A root slot no update has written yet holds no
filesystem and is passed over; so is the slot an install was writing at
the cut (RAUC marked it bad before writing; the next install writes it
whole). check() returns the findings (systest/image fails a test on
any). Python's standard library, e2fsprogs and sqlite3 only.
"""
import json
import os
import subprocess
import tempfile

# e2fsprogs and sfdisk live in /usr/sbin, which a user's PATH may lack.
os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"


def partitions(disk):
    """{number: (byte offset, byte size)} from the partition table."""
    table = json.loads(subprocess.run(["sfdisk", "-J", disk], capture_output=True, text=True, check=True).stdout)
    t = table["partitiontable"]
    sector = t.get("sectorsize", 512)
    return {k + 1: (p["start"] * sector, p["size"] * sector) for k, p in enumerate(t["partitions"])}


def copy_out(disk, offset, size, dest):
    subprocess.run(["dd", f"if={disk}", f"of={dest}", "bs=1M", "iflag=skip_bytes,count_bytes",
                    f"skip={offset}", f"count={size}", "conv=sparse", "status=none"], check=True)


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def check(disk, label, state, roots, skip=None, work=None):
    """The findings: a list of (passed, name, detail); one PASS when all is well."""
    parts = partitions(disk)
    findings = []
    with tempfile.TemporaryDirectory(prefix="disk.", dir=work) as w:
        image = f"{w}/part.ext4"
        for p in [state, *roots]:
            if p == skip:
                continue
            copy_out(disk, *parts[p], image)
            if p != state and run("dumpe2fs", "-h", image)[0] != 0:
                continue  # a slot no update has written yet
            run("e2fsck", "-E", "journal_only", "-y", image)  # the journal, replayed as a mount would
            rc, out = run("e2fsck", "-fn", image)
            if rc != 0:
                findings.append((False, f"fsck_{label}", f"partition {p}: {' '.join(out.splitlines()[-3:])}"))
            if p == state:
                db = f"{w}/db.sqlite"
                for name, dest in (("soundbox.db", db), ("soundbox.db-wal", db + "-wal")):
                    run("debugfs", "-R", f"dump /{name} {dest}", image)
                if not os.path.exists(db) or os.path.getsize(db) == 0:
                    findings.append((False, f"sqlite_{label}", "no soundbox.db on the state partition"))
                else:
                    rc, out = run("sqlite3", db, "PRAGMA integrity_check")
                    if rc != 0 or out != "ok":
                        findings.append((False, f"sqlite_{label}", f"integrity_check: {out[:300]}"))
            os.remove(image)
    if not findings:
        findings.append((True, f"disk_{label}", "e2fsck -fn clean on state and root, integrity_check ok"))
    return findings
