/// How the project reads the text files people write (settings, voice-pack
/// manifests, key files, control requests), whatever editor wrote them:
/// Windows' CRLF line ends and a leading UTF-8 byte order mark are read as
/// a Unix editor's file would be. And how such text is quoted back in an
/// error: short, and with nothing invisible.
public enum TextFile {
    /// The UTF-8 byte order mark Notepad writes at the start of a file.
    public static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The regular file `path` (`Files.contents`), without a leading byte
    /// order mark: settings, manifests, key files.
    public static func read(_ path: String, limit: Int) throws(FileError) -> [UInt8] {
        droppingBOM(try Files.contents(path, limit: limit))
    }

    /// `bytes` without a leading byte order mark (text from standard input).
    public static func droppingBOM(_ bytes: [UInt8]) -> [UInt8] {
        bytes.starts(with: byteOrderMark) ? Array(bytes.dropFirst(byteOrderMark.count)) : bytes
    }

    /// The lines of `text`, without their "\n" or "\r\n" (and without a
    /// leading byte order mark). Split on Unicode scalars: Swift's "\r\n"
    /// is one Character, so splitting a String's Characters at "\n" never
    /// splits a Windows file at all. A last line without "\n" is a line;
    /// the empty text after a final "\n" is one too (an empty line).
    public static func lines(_ text: some StringProtocol) -> [Substring] {
        var scalars = Substring(text).unicodeScalars[...]
        if scalars.first == "\u{FEFF}" { scalars = scalars.dropFirst() }
        return scalars.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            Substring(line.last == "\r" ? line.dropLast() : line)
        }
    }

    /// The line up to a byte buffer's first "\n", without it and without a
    /// "\r" before it (a raw client's CRLF).
    public static func line(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.last == UInt8(ascii: "\r") ? bytes.dropLast() : bytes, as: UTF8.self)
    }

    /// Text from elsewhere shown whole to people (what devices report
    /// about themselves in soundbox-fleet's table, CSV and JSON): each
    /// control or invisible scalar escaped as a log line would write it
    /// (`LogLine.appendVisible`: `\n`, `\r`, `\t`, `\u{1B}`, `\u{202E}`),
    /// everything else, spaces and any script, as it is. A backslash stays
    /// a backslash, so escaping twice changes nothing: text escaped once on
    /// its way in (`excerpt`) is shown the same.
    public static func visible(_ text: some StringProtocol) -> String { visible(scalars: text.unicodeScalars) }

    private static func visible(scalars: some Sequence<Unicode.Scalar>) -> String {
        var out = ""
        for u in scalars { LogLine.appendVisible(u, to: &out) }
        return out
    }

    /// User text as an error quotes it: at most `limit` characters (Unicode
    /// scalars) of it `visible`; a longer text ends in "… (N bytes)" so
    /// that a 10 MB value is not echoed whole.
    public static func excerpt(_ text: some StringProtocol, limit: Int = 40) -> String {
        let scalars = text.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: limit, limitedBy: scalars.endIndex), end < scalars.endIndex else {
            return visible(text)
        }
        return visible(scalars: scalars[..<end]) + "… (\(text.utf8.count) bytes)"
    }
}
