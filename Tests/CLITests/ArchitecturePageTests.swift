// docs/ARCHITECTURE.md against the tree: every target of Package.swift and
// every systemd unit the repository ships is named on the page; and a long
// Swift file says at its top why it is long.
import Foundation
import Testing

/// The one-page map for a newcomer falls behind when a target or a unit is
/// added without it: this test names what the page is missing.
@Suite struct ArchitecturePageTests {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// Package.swift's targets by kind: `.target(name: "X"`, and so on.
    static func targets(_ manifest: String) -> [(kind: String, name: String)] {
        let pattern = #/\.(target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*"([^"]+)"/#
        return manifest.matches(of: pattern).map { (String($0.output.1), String($0.output.2)) }
    }

    /// The systemd units (`*.service`, `*.timer`, `*.path`, `*.socket`,
    /// `*.mount`) under board/ and image/, by file name.
    static func units() -> [String] {
        var found: [String] = []
        for top in ["board", "image"] {
            let dir = root + "/" + top
            guard let walk = FileManager.default.enumerator(atPath: dir) else { continue }
            for case let path as String in walk {
                let name = (path as NSString).lastPathComponent
                guard [".service", ".timer", ".path", ".socket", ".mount"].contains(where: { name.hasSuffix($0) }) else { continue }
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: dir + "/" + path, isDirectory: &isDir), !isDir.boolValue { found.append(name) }
            }
        }
        return found.sorted()
    }

    /// A name counts when the page has it as code (`Name`); a system
    /// library also when the page has a code wildcard covering it (`C*`).
    static func missing(from page: String, targets: [(kind: String, name: String)], units: [String]) -> [String] {
        let wildcards = page.matches(of: #/`([A-Za-z]+)\*`/#).map { String($0.output.1) }
        var missing: [String] = []
        for t in targets where !page.contains("`\(t.name)`") {
            if t.kind == "systemLibrary" && wildcards.contains(where: { t.name.hasPrefix($0) }) { continue }
            missing.append("\(t.name) (.\(t.kind) in Package.swift)")
        }
        for u in units where !page.contains("`\(u)`") { missing.append("\(u) (a systemd unit)") }
        return missing
    }

    @Test func namesEveryTargetAndUnit() throws {
        let manifest = try String(contentsOfFile: Self.root + "/Package.swift", encoding: .utf8)
        let page = try String(contentsOfFile: Self.root + "/docs/ARCHITECTURE.md", encoding: .utf8)
        let targets = Self.targets(manifest)
        let units = Self.units()
        // The parsers still see the tree (an empty list would pass anything).
        #expect(targets.count >= 30 && ["soundboxd", "SoundboxDaemon", "CSQLite", "DaemonTests"].allSatisfy { n in targets.contains { $0.name == n } },
                "Package.swift's targets were not found: \(targets.map(\.name))")
        #expect(units.contains("soundboxd.service") && units.contains("soundbox-update-health.timer"), "units found: \(units)")
        let missing = Self.missing(from: page, targets: targets, units: units)
        #expect(missing.isEmpty, "docs/ARCHITECTURE.md does not name (as `code`): \(missing.joined(separator: ", ")); add each where it belongs on the page")
    }

    /// The repository's top-level folders that "What lives outside Swift"
    /// must name as `**name/**`: all but the hidden ones, those .gitignore
    /// ignores (`/out/`) and the Swift and docs folders the page is about.
    static func foldersOutsideSwift(_ names: [String], gitignore: String) -> [String] {
        let ignored = Set(gitignore.split(separator: "\n").compactMap { line -> String? in
            line.hasPrefix("/") && line.hasSuffix("/") ? String(line.dropFirst().dropLast()) : nil
        })
        return names.filter { !$0.hasPrefix(".") && !ignored.contains($0) && !["Sources", "Tests", "docs"].contains($0) }.sorted()
    }

    @Test func namesEveryFolderOutsideSwift() throws {
        let fm = FileManager.default
        let names = try fm.contentsOfDirectory(atPath: Self.root).filter { name in
            var isDir: ObjCBool = false
            return fm.fileExists(atPath: Self.root + "/" + name, isDirectory: &isDir) && isDir.boolValue
        }
        let folders = Self.foldersOutsideSwift(names, gitignore: try String(contentsOfFile: Self.root + "/.gitignore", encoding: .utf8))
        #expect(["image", "scripts", "systest"].allSatisfy(folders.contains), "top-level folders found: \(folders)")
        let page = try String(contentsOfFile: Self.root + "/docs/ARCHITECTURE.md", encoding: .utf8)
        let missing = folders.filter { !page.contains("**\($0)/**") }
        #expect(missing.isEmpty, "docs/ARCHITECTURE.md's \"What lives outside Swift\" does not name: \(missing.map { "**\($0)/**" }.joined(separator: ", "))")
    }

    @Test func ignoredAndSwiftFoldersNeedNoBullet() {
        #expect(Self.foldersOutsideSwift(["out", ".git", "Sources", "Tests", "docs", "bench", "new"], gitignore: "/.build/\n/out/\n*.o\n")
                == ["bench", "new"])
    }

    /// The wildcard covers system libraries only, and only by prefix.
    @Test func aWildcardCoversOnlySystemLibraries() {
        let page = "| `C*` | one system-library target per C library |"
        let targets = [("systemLibrary", "CALSA"), ("target", "CVoiceTools"), ("systemLibrary", "Other")]
        #expect(Self.missing(from: page, targets: targets.map { (kind: $0.0, name: $0.1) }, units: ["x.service"])
                == ["CVoiceTools (.target in Package.swift)", "Other (.systemLibrary in Package.swift)", "x.service (a systemd unit)"])
    }

    /// A Swift file over this many lines says why in its first lines: a
    /// comment with its size ("// ~560 lines: ...") or that it is generated.
    static let longFile = 460

    /// The Swift files under Sources/ and Tests/ longer than `longFile`
    /// whose first 8 lines give no reason.
    static func longWithoutReason(_ files: [(path: String, text: String)]) -> [String] {
        files.compactMap { file in
            let lines = file.text.split(separator: "\n", omittingEmptySubsequences: false)
            guard lines.count > longFile else { return nil }
            let head = lines.prefix(8).filter { $0.hasPrefix("//") }
            let said = head.contains { $0.contains(#/~\d+ lines/#) || $0.hasPrefix("// Generated by") }
            return said ? nil : "\(file.path) (\(lines.count) lines)"
        }
    }

    @Test func everyLongSwiftFileSaysWhy() throws {
        var files: [(path: String, text: String)] = []
        for top in ["Sources", "Tests"] {
            guard let walk = FileManager.default.enumerator(atPath: Self.root + "/" + top) else { continue }
            for case let path as String in walk where path.hasSuffix(".swift") {
                files.append((top + "/" + path, try String(contentsOfFile: Self.root + "/" + top + "/" + path, encoding: .utf8)))
            }
        }
        #expect(files.count > 100, "the walk found \(files.count) Swift files")
        let silent = Self.longWithoutReason(files)
        #expect(silent.isEmpty, "over \(Self.longFile) lines with no reason in the first lines (\"// ~N lines: why\"): \(silent.joined(separator: ", "))")
    }

    /// The reason must be a comment near the top, with the size in it.
    @Test func aLongFilesReasonIsAtItsTop() {
        let body = String(repeating: "let x = 1\n", count: Self.longFile + 1)
        let files = [("a.swift", "// ~470 lines: one parser.\n" + body),
                     ("b.swift", "import Foundation\n" + body),
                     ("c.swift", String(repeating: "\n", count: 8) + "// ~470 lines: too late.\n" + body),
                     ("d.swift", "// Generated by a script. Do not edit.\n" + body),
                     ("e.swift", "// short\n")]
        #expect(Self.longWithoutReason(files.map { (path: $0.0, text: $0.1) }) == ["b.swift (\(Self.longFile + 3) lines)", "c.swift (\(Self.longFile + 11) lines)"])
    }
}
