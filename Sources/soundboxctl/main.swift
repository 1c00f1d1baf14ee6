// soundboxctl: the technician's tool. Offline commands only need the voice
// packs; online commands (Online.swift) talk to soundboxd over its control
// socket. See `soundboxctl --help` and docs/soundboxctl.md.
import FoundationEssentials
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxAudio
import VoiceBuild

let usage = """
    Usage: soundboxctl [--json] [--config FILE] [--voices DIR] [--socket PATH] COMMAND [ARGS]

    Online commands (talk to soundboxd over its control socket):
      status          the daemon's state: volume, queue depth, voice, faults
      queue           payments waiting to be spoken, oldest first
      history [--limit N]
                      recent payments, newest first (N 1-1000, default 20)
      replay [ID]     speak a payment again (default: the last one)
      say AMOUNT [--lang L] [--id ID]
                      announce an amount through the daemon's queue; it opens
                      with the test words (测试 / "test"), never a payment's
      volume [N|up|down]
                      show or set the volume (0-10; kept across restarts)
      config get [KEY]
                      the effective settings, or one
      config set KEY VALUE
                      change a setting (validated and kept across restarts); keys
                      that name files, devices or the broker are set only in the
                      settings file (`config keys` says who may change what)
      test-audio      speak the test prompt and a sample amount now
      doctor          health checks (audio, voice, broker, gpio, database, disk,
                      clock, signing, provisioning, update, config), each OK,
                      WARN or FAIL with a hint
      wait [--timeout S]
                      wait until nothing is queued or speaking (default 60 s)
      update status   the system update: state, progress, version, reason; the
                      version and slot that run
      update install FILE|URL [--sha256 HEX --bundle-version V] [--force] [--wait]
                      install a signed bundle (.raucb; a URL needs its sha256
                      and version): soundboxd downloads it or copies FILE into its
                      update folder, installs it at a quiet moment, reboots into
                      the other slot once the queue is empty, and commits it
                      when it runs well (else the box goes back by itself);
                      --force: a technician's downgrade; --wait: follow it
      update cancel   stop a download, or an installed update waiting to reboot

    Offline commands (no daemon needed):
      words AMOUNT [--lang L] [--channel C]
                      print the clip names of an announcement, space separated
      render AMOUNT [-o FILE.wav | --device PCM] [--lang L] [--channel C] [--volume N]
                      write the announcement as a WAV file, or play it on an
                      ALSA device (e.g. default, hw:0,0, file:'/tmp/o.raw',raw);
                      with neither, play it on the configured audio.output
      voice check DIR check a voice pack: manifest, every clip decodes, nothing missing;
                      each clip's loudness and the pack's spread (needs libebur128)
      voice build SRC OUT --lang L [--lufs N] [--true-peak N] [--eq] [--source TEXT]
                      a voice pack from recordings named by clip (SRC/<clip>.wav,
                      .flac ...; any rate, mono or stereo): silence trimmed,
                      resampled, every clip at one loudness (voice.target_lufs,
                      -16 LUFS) under a true-peak ceiling (voice.true_peak_dbtp,
                      -1 dBTP), --eq: a clarity EQ for a small speaker; gapless
                      mp3s and manifest.json in the new folder OUT (its name is
                      the pack's); clips the grammar needs and SRC lacks are
                      named; --source: where the recordings came from, for the
                      manifest. Needs libsndfile, libsoxr, libebur128, libmp3lame
      voice clips [--lang L]
                      the clip names a pack for that grammar needs, one a line:
                      the files a recording session must make
      config keys     every setting: default, allowed values, who may change it
      key id FILE     the id of an Ed25519 key (PEM, public or private): what a
                      signed message names in "kid"
      sign --key PRIVATE [--kind payment|cmd|config] [--device ID] PAYLOAD
                      sign a message as a backend must for payment.signing =
                      required (docs/signing.md): adds kid, ts, nonce (cmd) and
                      sig, prints the message; PAYLOAD is JSON, or - for stdin
      provision check SRC STAGE [--soundboxd PATH] [--keys DIR]
                      check a provisioning folder (the boot partition's soundbox/:
                      settings, certificates, keys, wifi.conf, hostname) and
                      stage its files, Windows line ends dropped, into the empty
                      folder STAGE, with the wpa_supplicant.conf to install; the
                      first problem is printed as soundbox/FILE:LINE: why (exit 1).
                      Run by the image at boot (image/README.md)

    Options:
      --json          machine-readable output on stdout
      --config FILE   settings file (default /etc/soundbox/soundbox.conf, if present)
      --voices DIR    voice pack folder (default: $SOUNDBOX_VOICES, else voice.dir, else
                      beside this program: ../share/soundbox/voices or the checkout's voices/)
      --socket PATH   soundboxd's control socket (default: $SOUNDBOX_SOCKET, else
                      control.socket, else /run/soundbox/control.sock)
      --lang L        voice pack / language (default voice.lang: zh-CN); zh-CN, en-IN,
                      hi-IN, as-IN, bn-IN, gu-IN, kn-IN, ml-IN, mr-IN, or-IN, pa-IN,
                      ta-IN, te-IN, ur-IN (docs/grammars.md)
      --channel C     alipay, wechat or other (picks the opening words); local: the
                      test words a `say` opens with
      --volume N      0-10 (default audio.volume: 6)
      -h, --help      this help;  --version  the version

    AMOUNT is a decimal with at most two decimals, 0.01 to 999999999999.99.
    Exit status: 0 success, 1 failure (explained; also a doctor check that
    fails or a say that is rejected), 2 usage error.
    """

extension Arguments {
    static let valued: Set<String> = ["--lang", "--channel", "--volume", "-o", "--output", "--device", "--voices", "--config",
                                      "--socket", "--limit", "--id", "--timeout", "--key", "--kind", "--device", "--lufs", "--true-peak", "--source", "--sha256", "--bundle-version", "--soundboxd", "--keys"]
    static let boolean: Set<String> = ["--json", "-h", "--help", "--version", "--eq", "--force", "--wait"]

    init(_ args: [String]) throws(Failure) {
        try self.init(args, valued: Self.valued, boolean: Self.boolean,
                      global: ["--json", "--help", "--version", "--config", "--voices", "--socket"])
    }
}

let env = ProcessInfo.processInfo.environment

func parseAmount(_ args: Arguments) throws(Failure) -> Amount {
    guard args.positional.count == 1 else {
        throw usageError(args.positional.isEmpty ? "missing AMOUNT" : "expected one AMOUNT, got \(args.positional.count) arguments")
    }
    do { return try Amount.parse(args.positional[0], max: .wordsMax) } catch {
        throw failure("'\(args.positional[0])': \(error)", code: error.code)
    }
}

nonisolated(unsafe) var configNoteShown = false   // soundboxctl is single-threaded

func config(_ args: Arguments) throws(Failure) -> Config {
    do { return try Config.load(path: args.options["--config"]) } catch {
        // The installed file is root:soundbox 0640 (it may hold the broker's
        // password): outside that group, go on with the defaults and say so.
        let fm = FileManager.default
        if args.options["--config"] == nil, fm.fileExists(atPath: Config.defaultPath), !fm.isReadableFile(atPath: Config.defaultPath) {
            if !configNoteShown {
                printError("note: cannot read \(Config.defaultPath) (permission denied: run as root or join group soundbox); using the defaults")
                configNoteShown = true
            }
            return Config()
        }
        throw failure(error.description, code: "config")
    }
}

func voicesDirectory(_ args: Arguments) throws(Failure) -> String {
    if let dir = args.options["--voices"] ?? env["SOUNDBOX_VOICES"] { return dir }
    let settings = try config(args)
    return settings.isSet(TextKey.voiceDir.key) ? settings[.voiceDir] : VoiceCatalog.defaultDirectory()
}

func language(_ args: Arguments) throws(Failure) -> String {
    if let lang = args.options["--lang"] { return lang }
    return try config(args)[.voiceLang]
}

/// The grammar for --lang: a grammar's own name, or a pack that names one.
func grammar(_ args: Arguments) throws(Failure) -> any Grammar {
    let lang = try language(args)
    if let g = Grammars.named(lang) { return g }
    let dir = try voicesDirectory(args)
    do { return try VoicePackManifest.load(directory: dir + "/" + lang).grammarImplementation } catch {
        throw failure("unknown language '\(lang)' (\(error)); grammars: \(Grammars.all.map(\.name).joined(separator: ", "))", code: "unknown_lang")
    }
}

/// A payment's channels, and `local` (how `say` opens).
func channel(_ args: Arguments) -> Channel {
    args.options["--channel"].flatMap { Channel(rawValue: $0.lowercased()) } ?? Channel(name: args.options["--channel"])
}

func configKeys(_ out: Output) {
    struct Key: Encodable { var key, default_value, allowed, scope, help: String }
    out.emit(ConfigKey.all.map { Key(key: $0.name, default_value: $0.defaultValue, allowed: $0.kind.allowed, scope: "\($0.scope)", help: $0.help) },
             text: ConfigKey.markdownTable)
}

func run(_ args: Arguments) throws(Failure) {
    let out = Output(json: args.flags.contains("--json"))
    if args.flags.contains("--version") { print("soundboxctl \(soundboxVersion)"); return }
    guard let (command, rest) = try args.command(usage: usage) else { return }
    switch command {
    case "words": try words(rest, out)
    case "render": try render(rest, out)
    case "voice": try voice(rest, out)
    case "config" where rest.positional == ["keys"]: configKeys(out)
    case "key": try keyCommand(rest, out)
    case "provision": try provisionCommand(rest, out)
    case "sign": try signCommand(rest, out)
    case "update": try updateCommand(rest, out)
    case "help": print(usage)
    default:
        guard let online = OnlineCommand(rawValue: command) else { throw usageError("unknown command '\(command)' (see --help)") }
        try runOnline(online, rest, out)
    }
}

runMain(Array(CommandLine.arguments.dropFirst())) { argv throws(Failure) in try run(try Arguments(argv)) }
