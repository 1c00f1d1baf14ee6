import Foundation
import TestSupport

/// The repository's voices/ folder.
let repoVoices: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path + "/voices"
}()

extension Scratch {
    /// Copies voice packs from the repository into this folder.
    func copyPacks(_ names: String...) throws {
        for n in names { try FileManager.default.copyItem(atPath: repoVoices + "/" + n, toPath: path + "/" + n) }
    }

    /// Rewrites a pack's manifest.json through a closure over its JSON object.
    func editManifest(_ pack: String, _ edit: (inout [String: Any]) -> Void) throws {
        let file = path + "/" + pack + "/manifest.json"
        var obj = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as! [String: Any]
        edit(&obj)
        try JSONSerialization.data(withJSONObject: obj).write(to: URL(fileURLWithPath: file))
    }
}

extension Array where Element == Int16 {
    var bytes: Data { withUnsafeBytes { Data($0) } }
}
