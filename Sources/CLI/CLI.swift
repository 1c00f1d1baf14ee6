// What soundboxctl and soundbox-fleet share on the command line: options
// and positionals, errors with an exit status, text or --json output.
import FoundationEssentials
import Glibc

/// A failed command: the message, a machine-readable code (`--json`'s
/// `{"error", "code"}`) and the exit status (1 failure, 2 usage).
public struct Failure: Error {
    public var message: String
    public var code: String
    public var status: Int32
    public init(message: String, code: String, status: Int32) { self.message = message; self.code = code; self.status = status }
}
public func usageError(_ m: String) -> Failure { Failure(message: m, code: "usage", status: 2) }
public func failure(_ m: String, code: String) -> Failure { Failure(message: m, code: code, status: 1) }

/// Arguments after the program's name: positionals, `--name value` pairs
/// and flags. After `--` everything is positional (`config set KEY -- -x`).
public struct Arguments {
    public var positional: [String] = []
    public var options: [String: String] = [:]
    public var flags: Set<String> = []
    /// Options every command accepts.
    public let global: Set<String>

    /// `valued`: options that take a value; `boolean`: flags (`-h` is
    /// `--help`, `--output` is `-o`).
    public init(_ args: [String], valued: Set<String>, boolean: Set<String>, global: Set<String>) throws(Failure) {
        self.global = global
        var it = args.makeIterator()
        while let a = it.next() {
            if a == "--" {
                while let rest = it.next() { positional.append(rest) }
            } else if valued.contains(a) {
                guard let v = it.next() else { throw usageError("\(a) needs a value") }
                options[a == "--output" ? "-o" : a] = v
            } else if boolean.contains(a) {
                flags.insert(a == "-h" ? "--help" : a)
            } else if a.hasPrefix("-") && a.count > 1 && Double(a) == nil {
                throw usageError("unknown option \(a)")
            } else {
                positional.append(a)
            }
        }
    }

    /// The command and the arguments after it; nil when `--help` was asked
    /// (`usage` is printed then).
    public func command(usage: String) throws(Failure) -> (name: String, rest: Arguments)? {
        guard !flags.contains("--help"), let name = positional.first else {
            if flags.contains("--help") { print(usage); return nil }
            throw usageError("missing COMMAND (see --help)")
        }
        var rest = self
        rest.positional.removeFirst()
        return (name, rest)
    }

    /// Rejects options that `command` does not take besides the global ones.
    public func allowOnly(_ allowed: Set<String>, for command: String) throws(Failure) {
        let given = Set(options.keys).union(flags)
        if let bad = given.subtracting(allowed).subtracting(global).sorted().first {
            throw usageError("\(command) does not take \(bad) (see --help)")
        }
    }
}

/// "program: message" on standard error (the program's name as it was started).
public func printError(_ message: String) {
    let program = CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? Substring($0)) } ?? "soundbox"
    let line = Array("\(program): \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// Prints results as text or, with --json, as one JSON object.
public struct Output {
    public var json: Bool
    public init(json: Bool) { self.json = json }
    public func emit<T: Encodable>(_ value: T, text: String) {
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try! e.encode(value), as: UTF8.self))
        } else {
            print(text)
        }
    }
}

/// Runs a program's `run`, printing a failure as text or (with --json) as
/// `{"error", "code"}`, and exits with its status (a failure without a
/// message: only the status).
public func runMain(_ argv: [String], _ run: ([String]) throws(Failure) -> Void) -> Never {
    do {
        try run(argv)
        exit(0)
    } catch {
        // A failure already reported on stdout (a summary that says what went wrong): only the status.
        if error.message.isEmpty { exit(error.status) }
        if argv.contains("--json") {
            struct Err: Encodable { var error: String; var code: String }
            Output(json: true).emit(Err(error: error.message, code: error.code), text: "")
        } else {
            printError(error.message)
        }
        exit(error.status)
    }
}
