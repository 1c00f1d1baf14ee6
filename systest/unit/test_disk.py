"""systest/disk.py on a small card made here: three ext4 partitions (the
state with a real SQLite queue, two root slots), clean or damaged."""
import os
import sqlite3
import subprocess

import pytest

from disk import check, partitions

MIB = 1 << 20
STATE, ROOT_A, ROOT_B = 3, 1, 2


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def ext4(path, size=8 * MIB, files=()):
    with open(path, "wb") as f:
        f.truncate(size)
    sh("mkfs.ext4", "-q", "-F", path)
    for src, name in files:
        sh("debugfs", "-w", "-R", f"write {src} {name}", path)


def card(tmp, state, root_a=None):
    """A card of three 8 MiB partitions: 1 root A, 2 root B (never written), 3 the state."""
    disk = f"{tmp}/card.img"
    with open(disk, "wb") as f:
        f.truncate(32 * MIB)
    layout = "label: gpt\n" + "size=8MiB, type=linux\n" * 3
    subprocess.run(["sfdisk", "-q", disk], input=layout, text=True, check=True, capture_output=True)
    parts = partitions(disk)
    for p, image in ((STATE, state), (ROOT_A, root_a)):
        if image:
            sh("dd", f"if={image}", f"of={disk}", "bs=1M", "oflag=seek_bytes", f"seek={parts[p][0]}", "conv=notrunc", "status=none")
    return disk


def queue_db(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE payments (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, amount_minor INTEGER)")
    db.executemany("INSERT INTO payments (id, amount_minor) VALUES (?, ?)", [(f"T{i}", i * 100) for i in range(2000)])
    db.commit()
    db.close()


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


def test_a_clean_card_passes(tmp):
    queue_db(f"{tmp}/db")
    ext4(f"{tmp}/state", files=[(f"{tmp}/db", "soundbox.db")])
    ext4(f"{tmp}/root")
    assert check(card(tmp, f"{tmp}/state", f"{tmp}/root"), "t", STATE, [ROOT_A, ROOT_B]) == \
        [(True, "disk_t", "e2fsck -fn clean on state and root, integrity_check ok")]


def test_a_damaged_database_fails(tmp):
    queue_db(f"{tmp}/db")
    with open(f"{tmp}/db", "r+b") as f:  # pages 2 onwards overwritten: a torn write
        f.seek(4096)
        f.write(b"\xa5" * 8192)
    ext4(f"{tmp}/state", files=[(f"{tmp}/db", "soundbox.db")])
    found = check(card(tmp, f"{tmp}/state"), "t", STATE, [ROOT_A, ROOT_B])
    assert [(ok, name) for ok, name, _ in found] == [(False, "sqlite_t")]


def test_no_database_fails(tmp):
    ext4(f"{tmp}/state")
    assert check(card(tmp, f"{tmp}/state"), "t", STATE, [ROOT_A, ROOT_B]) == \
        [(False, "sqlite_t", "no soundbox.db on the state partition")]


def test_a_damaged_slot_fails_unless_it_was_being_written(tmp):
    queue_db(f"{tmp}/db")
    ext4(f"{tmp}/state", files=[(f"{tmp}/db", "soundbox.db")])
    ext4(f"{tmp}/root")
    with open(f"{tmp}/root", "r+b") as f:  # the block group descriptors (the block after the superblock's)
        f.seek(4096)
        f.write(b"\xff" * 1024)
    disk = card(tmp, f"{tmp}/state", f"{tmp}/root")
    found = check(disk, "t", STATE, [ROOT_A, ROOT_B])
    assert [(ok, name) for ok, name, _ in found] == [(False, "fsck_t")]
    assert found[0][2].startswith(f"partition {ROOT_A}: ")
    assert check(disk, "t", STATE, [ROOT_A, ROOT_B], skip=ROOT_A)[0][0]
