// docs/ARCHITECTURE.md against the tree: every target of Package.swift and
// every systemd unit the repository ships is named on the page.
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

    /// The wildcard covers system libraries only, and only by prefix.
    @Test func aWildcardCoversOnlySystemLibraries() {
        let page = "| `C*` | one system-library target per C library |"
        let targets = [("systemLibrary", "CALSA"), ("target", "CVoiceTools"), ("systemLibrary", "Other")]
        #expect(Self.missing(from: page, targets: targets.map { (kind: $0.0, name: $0.1) }, units: ["x.service"])
                == ["CVoiceTools (.target in Package.swift)", "Other (.systemLibrary in Package.swift)", "x.service (a systemd unit)"])
    }
}
