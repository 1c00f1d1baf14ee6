// soundboxd: the payment soundbox daemon (see `soundboxd --help`).
import Glibc
import SoundboxDaemon

var environment: [String: String] = [:]
var e = environ
while let p = e.pointee {
    let s = String(cString: p)
    if let eq = s.firstIndex(of: "=") { environment[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
    e += 1
}
exit(Daemon.main(Array(CommandLine.arguments.dropFirst()), environment: environment))
