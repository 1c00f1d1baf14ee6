import Glibc
import SoundboxSystem

/// A -wal file that SQLite would read only in part: a frame that fails its
/// checksum with whole transactions of the same log after it. SQLite stops
/// replaying at the first bad frame and says nothing; what was committed
/// after it (payments already acknowledged, their dedup records) would be
/// gone without a word. A torn tail (a power cut in the middle of writing
/// frames that were never flushed) is not damage: nothing valid follows it.
///
/// The check reads the file before SQLite does (docs/soundboxd.md, "A damaged
/// write-ahead log"). It can be wrong one way: a power cut in the middle of
/// a write-back that reached the card out of order can leave a later,
/// never-acknowledged transaction intact after a torn one. It then reports
/// damage where nothing acknowledged was lost, never the other way round.
public struct WALDamage: Sendable, Equatable, CustomStringConvertible {
    /// Frames SQLite replays (up to the last whole transaction before the damage).
    public var replayed: Int
    /// The first frame (counted from 0) that fails its check; nil when the header does.
    public var badFrame: Int?
    /// Whole transactions found after it, which SQLite drops.
    public var lostCommits: Int
    /// Where the file was kept, as it was, before SQLite read it (nil: it could not be copied).
    public var copy: String?

    public var description: String {
        (badFrame.map { "frame \($0) of the WAL fails its checksum" } ?? "the WAL's header fails its checksum")
            + "; \(lostCommits) transaction\(lostCommits == 1 ? "" : "s") written after it cannot be replayed (\(replayed) frames before it can)"
    }
}

enum WALCheck {
    /// Checks `wal` (nil when it is missing, empty, whole, or only torn at its end).
    static func inspect(_ wal: String) -> WALDamage? {
        let fd = open(wal, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size > 32 else { return nil }
        let size = Int(st.st_size)
        guard let header = read(fd, at: 0, count: 32) else { return nil }
        let magic = header.u32(0)
        guard magic & ~1 == 0x377F_0682 else { return nil }   // not a WAL: SQLite ignores it too
        let bigEndianWords = magic & 1 == 1
        let rawPage = Int(header.u32(8))
        let pageSize = rawPage == 1 ? 65536 : rawPage
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return nil }
        let frameSize = 24 + pageSize
        let frames = (size - 32) / frameSize
        guard frames > 0 else { return nil }

        let (h1, h2) = checksum(header, 0..<24, seed: (0, 0), bigEndianWords)
        let headerOK = (h1, h2) == (header.u32(24), header.u32(28))
        var salts = (header.u32(16), header.u32(20))
        var seed = (h1, h2)
        var replayed = 0
        var bad: Int?
        var first = 0
        if headerOK {
            // Frames as SQLite reads them: salts of this log, checksums chained from the header.
            for i in 0..<frames {
                guard let frame = read(fd, at: 32 + i * frameSize, count: frameSize) else { return nil }
                let sum = checksum(frame, 0..<8, seed: seed, bigEndianWords)
                let total = checksum(frame, 24..<frameSize, seed: sum, bigEndianWords)
                guard (frame.u32(8), frame.u32(12)) == salts, total == (frame.u32(16), frame.u32(20)) else { bad = i; break }
                seed = total
                if frame.u32(4) != 0 { replayed = i + 1 }
            }
            guard let b = bad else { return nil }
            first = b + 1
        } else {
            // No salts to trust: those of the first frame, checked by what follows it.
            guard let frame = read(fd, at: 32, count: 24) else { return nil }
            salts = (frame.u32(8), frame.u32(12))
            first = 1
        }
        // After the bad frame: a frame of this log is one that checks out
        // from the checksums its predecessor stores. Whole transactions there
        // were written after the damage, and SQLite will not replay them.
        var lost = 0
        var j = max(first, 1)
        while j < frames {
            guard let previous = read(fd, at: 32 + (j - 1) * frameSize + 16, count: 8),
                  let frame = read(fd, at: 32 + j * frameSize, count: frameSize) else { break }
            let sum = checksum(frame, 0..<8, seed: (previous.u32(0), previous.u32(4)), bigEndianWords)
            if (frame.u32(8), frame.u32(12)) == salts, frame.u32(4) != 0,
               checksum(frame, 24..<frameSize, seed: sum, bigEndianWords) == (frame.u32(16), frame.u32(20)) {
                lost += 1
            }
            j += 1
        }
        guard lost > 0 else { return nil }
        return WALDamage(replayed: replayed, badFrame: headerOK ? bad : nil, lostCommits: lost, copy: nil)
    }

    /// Copies `wal` to the first free name of `wal`.damaged, .damaged.2 …
    /// .damaged.9 (flushed, as are the folder's names); nil when it could not
    /// (nine copies kept already: the oldest are the technician's to look at).
    static func keep(_ wal: String) -> String? {
        guard let name = ([""] + (2...9).map { ".\($0)" }).map({ wal + ".damaged" + $0 }).first(where: { access($0, F_OK) != 0 }) else { return nil }
        let from = open(wal, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard from >= 0 else { return nil }
        defer { close(from) }
        let to = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard to >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var ok = true
        while ok {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(from, $0.baseAddress, $0.count) }
            if n == 0 { break }
            ok = n > 0 && buffer.withUnsafeBytes { write(to, $0.baseAddress, n) } == n
        }
        ok = ok && fsync(to) == 0
        close(to)
        guard ok else { unlink(name); return nil }
        Paths.syncFolder(containing: wal)
        return name
    }

    /// The copies `keep` made of `wal` that are still there.
    static func copies(of wal: String) -> [String] {
        ([""] + (2...9).map { ".\($0)" }).map { wal + ".damaged" + $0 }.filter { access($0, F_OK) == 0 }
    }

    /// SQLite's WAL checksum over `range` of `bytes` (a multiple of 8), from `seed`.
    private static func checksum(_ bytes: [UInt8], _ range: Range<Int>, seed: (UInt32, UInt32), _ bigEndianWords: Bool) -> (UInt32, UInt32) {
        var (s1, s2) = seed
        var i = range.lowerBound
        while i < range.upperBound {
            let a = bigEndianWords ? bytes.u32(i) : bytes.u32le(i)
            let b = bigEndianWords ? bytes.u32(i + 4) : bytes.u32le(i + 4)
            s1 = s1 &+ a &+ s2
            s2 = s2 &+ b &+ s1
            i += 8
        }
        return (s1, s2)
    }

    private static func read(_ fd: Int32, at offset: Int, count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        return n == count ? buffer : nil
    }
}

private extension [UInt8] {
    func u32(_ i: Int) -> UInt32 { UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3]) }
    func u32le(_ i: Int) -> UInt32 { UInt32(self[i + 3]) << 24 | UInt32(self[i + 2]) << 16 | UInt32(self[i + 1]) << 8 | UInt32(self[i]) }
}
